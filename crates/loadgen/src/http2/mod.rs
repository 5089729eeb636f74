//! HTTP/2 without I/O (RFC 9113): frames (`frame`), HPACK (`hpack`: the requests' header blocks and
//! the responses' decoding) and one connection's client side (`conn`). The exchange
//! drives it for `--h2`: over https:// negotiated by ALPN `h2`, over http:// with prior knowledge
//! (h2c). Why the framing is this crate's own and not a library's: docs/load-generator.md, "HTTP/2".

pub mod conn;
pub mod frame;
pub mod hpack;

pub use conn::{check_fuzz_input, Event, H2Conn, H2Settings, MAX_REQUEST_BODY};

/// `--h2-window`'s default, every stream's and the connection's receive window: h2load's default
/// (2^30 - 1), so that the two are compared with the same flow control.
pub const DEFAULT_WINDOW: u32 = (1 << 30) - 1;
/// `--streams`' upper bound.
pub const MAX_STREAMS: u32 = 10_000;

/// What every HTTP/2 connection of a run sends: each URL's header block (in `Requests` order) and
/// the request body.
pub struct H2Requests {
    pub settings: H2Settings,
    pub blocks: Vec<Vec<u8>>,
    pub body: Vec<u8>,
}
