//! Shared helpers for the integration tests: real servers on 127.0.0.1 (port 0), a runner for the
//! real `netarena-load` binary with a hard time limit, and the checks every result document must
//! pass. Every test file under tests/ includes this one module (`mod common;`) and imports what it
//! uses from it.
//!
//! - `servers`: the plumbing under every test server (`TestServer`, its `Stats`, listeners, RST).
//! - `http`: the one HTTP server: thread-per-connection, each request answered by a closure the test
//!   gives (`http_server`), or the same response every time (`hello_server`, or
//!   `fixed_http_server`, which also answers a pipelined batch in one write).
//! - `echo`: the one echo server, correct or with a chosen fault (`echo_server`, `EchoFault`).
//! - `tls`: https: a test CA with server certificates made at test time (good, expired, wrong
//!   name), the TLS HTTP server (`tls_http_server`), and servers that break the handshake.
//! - `h2`: a scripted h2c server answering each stream, or misbehaving on the streams a fault names
//!   (`h2c_server`, `H2Fault`).
//! - `nginx`: nginx on a free port with a server block the test writes (`start_nginx`).
//! - `run`: starting the binary (`run_load`, `spawn_load`), with `NETARENA_LOAD_TEST_IO` applied.
//! - `result`: the parsed result document with the invariants every result satisfies (`Result`).
//! - `schema`: validation against docs/schema/netarena-load.schema.json.
//!
//! Every server stops when its handle is dropped and no server thread outlives `SERVER_LIFETIME`,
//! so a broken generator cannot hang a test binary.

#![allow(dead_code)] // each test binary uses a different subset

mod echo;
mod h2;
mod http;
mod nginx;
mod result;
mod run;
mod schema;
mod servers;
mod tls;

// The submodules are an internal layout: tests name everything through `common::`.
#[allow(unused_imports)] // each test binary uses a different subset
pub use self::{
    echo::*, h2::*, http::*, nginx::*, result::*, run::*, schema::*, servers::*, tls::*,
};
