//! HTTP/1.1 bytes without I/O: the request bytes (`request`), the response parser (`parser`), what a
//! response must match (`expect`), and the URL list of `--urls` (`urls`). What the bytes mean for a
//! load run is `exchange`'s business; moving them is `io`'s.

mod expect;
mod parser;
mod request;
pub mod urls;

pub use expect::{hex, parse_sha256_hex, Expectation, Verdict};
pub(crate) use parser::SCRATCH_BYTES;
pub use parser::{fuzzing, parse_pieces, Response, ResponseParser, Step, MAX_HEAD_BYTES};
pub use request::{build_request, RequestSpec};
