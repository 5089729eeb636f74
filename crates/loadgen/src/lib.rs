//! netarena-load: the load generator behind netarena.
//!
//! Data flows `cli` → `config` (validated, defaults applied; no I/O) → `target` + `limits` (refuse
//! what cannot or must not run) → `load` (the load model: the closed loop or echo in `load::run`, the
//! open loop in `load::open_run`; one coordinator splits the work over threads and merges their
//! measurements) → `io` (one engine per thread, epoll or io_uring, moving the bytes) ↔ `exchange`
//! (what HTTP bytes mean, for every engine and load model) over `http` (parser, requests,
//! expectations) → `stats` (per-thread counters and histograms, merged once at the end) → `result`
//! (the document, the human summary, the thresholds).
//!
//! Layers, each importing only from those below it: `result` → `load` → `io` → `exchange` → `http`
//! → the base modules (`calibrate`, `cli`, `config`, `error`, `limits`, `parse`, `progress`,
//! `signals`, `stats`, `sys`, `target`, `threshold`). The contract with the outside world is
//! `docs/load-generator.md` and its JSON Schema.

pub mod calibrate;
pub mod cli;
pub mod config;
pub mod error;
pub mod exchange;
pub mod http;
pub mod io;
pub mod limits;
pub mod load;
pub mod parse;
pub mod progress;
pub mod result;
pub mod signals;
pub mod stats;
pub mod sys;
pub mod target;
pub mod threshold;
