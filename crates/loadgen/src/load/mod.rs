//! The load models: the coordinator every model uses and the closed loop and echo (`run`: threads'
//! shares, start, merge into one `RunOutcome`), and the open loop (`open`: one thread's schedule and
//! connections; `open_run`: warm-up, rates, steps, find-max; `schedule`: when each arrival is meant
//! to start).

pub mod open;
pub mod open_run;
pub mod run;
pub mod schedule;
