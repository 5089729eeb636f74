//! netarena-load: the load generator behind netarena.
//!
//! Data flows `cli` → `config` (validated, defaults applied; no I/O) → `target` + `limits` (refuse
//! what cannot or must not run) → `load` (the load model: the closed loop or echo in `load::run`, the
//! open loop in `load::open_run` over `load::open` and its `load::schedule`; one coordinator splits
//! the work over threads and merges their measurements) → `io` (one engine per thread, epoll or
//! io_uring, chosen in one place, `io::on_engine`, moving the bytes; https through `io::tls`, on
//! both engines, with the client settings of `tls`) ↔ `exchange` (what HTTP bytes mean, for every engine
//! and load model) over `http2` (HTTP/2 frames and connection state, for `--h2`) and `http`
//! (parser, requests, expectations) → `stats`
//! (per-thread counters and `histogram`s, merged once at the end) → `result` (the document, the
//! human summary, the thresholds).
//!
//! Layers, each importing only from those below it: `result` → `load` → `io` → `exchange` →
//! `config` → `http2` → `http` → the base modules (`calibrate`, `cli`, `error`, `histogram`, `limits`,
//! `parse`, `progress`, `rng`, `signals`, `stats`, `sweep`, `sys`, `target`, `threshold`, `tls`), which
//! import only one another, never in a cycle. tests/layering.rs checks both. The contract with the
//! outside world is `docs/load-generator.md` and its JSON Schema.

pub mod calibrate;
pub mod cli;
pub mod config;
pub mod error;
pub mod exchange;
pub mod histogram;
pub mod http;
pub mod http2;
pub mod io;
pub mod limits;
pub mod load;
pub mod parse;
pub mod progress;
pub mod result;
pub mod rng;
pub mod signals;
pub mod stats;
pub mod sweep;
pub mod sys;
pub mod target;
pub mod threshold;
pub mod tls;
