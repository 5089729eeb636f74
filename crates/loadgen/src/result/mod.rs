//! The result: the document (`document`: the JSON contract, docs/load-generator.md and its schema,
//! the HdrHistogram log), the human summary of it (`human`), the `--threshold` verdicts on it
//! (`thresholds`) and several documents of one measurement made into one (`merge`). Pure functions of the configuration and the outcomes the load models return.

pub mod document;
pub mod human;
pub mod merge;
pub mod thresholds;
