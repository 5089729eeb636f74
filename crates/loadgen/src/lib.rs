//! netarena-load: the load generator behind netarena.
//!
//! Data flows `cli` → `config` (validated, defaults applied) → `target` + `limits` (refuse what cannot
//! or must not run) → `engine` (one event loop per thread, driving either the `http` or the `echo`
//! protocol) → `stats` (per-thread counters and histograms, merged once at the end) → `output`.
//! The contract with the outside world is `docs/load-generator.md` and its JSON Schema.

pub mod cli;
pub mod config;
pub mod echo;
pub mod engine;
pub mod error;
pub mod exchange;
pub mod http;
pub mod limits;
pub mod openloop;
pub mod openrun;
pub mod output;
pub mod parse;
pub mod progress;
pub mod run;
pub mod schedule;
pub mod signals;
pub mod stats;
pub mod sys;
pub mod target;
pub mod thresholds;
pub mod uring;
pub mod urls;
