//! The one error type of a run, for every load model: what went wrong decides the exit code
//! (docs/load-generator.md, "Exit codes").

use std::fmt;

#[derive(Debug)]
pub enum RunError {
    /// Bad usage, a refused target, a limit that makes the run impossible, or a `--prepare` start
    /// time that cannot be kept: nothing was sent.
    Usage(String),
    /// The tool itself failed.
    Failure(String),
    /// `--prepare` got no start time (stdin closed): nothing was measured.
    Aborted(String),
}

impl RunError {
    pub const EXIT_FAILURE: u8 = 1;
    pub const EXIT_USAGE: u8 = 2;
    pub const EXIT_ABORTED: u8 = 3;

    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::Usage(_) => Self::EXIT_USAGE,
            RunError::Failure(_) => Self::EXIT_FAILURE,
            RunError::Aborted(_) => Self::EXIT_ABORTED,
        }
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Usage(m) | RunError::Failure(m) | RunError::Aborted(m) => f.write_str(m),
        }
    }
}
