//! The io_uring engine (`--io uring`, Linux 6.0+): the plumbing its loops share (`ring`), the closed
//! loop's and echo flood's worker (`closed`), the open loop's backend (`open`), the stage that holds
//! https's records and HTTP/2's frames until their send completes (`stage`), and the trial that
//! keeps `--coalesce-us auto`'s window only where it saves CPU (`window`). What travels on the
//! connections is the protocols' (`io::http`, with `io::tls`; `io::echo`), as on epoll.

pub mod closed;
pub mod open;
pub mod ring;
pub(crate) mod stage;
pub mod window;
