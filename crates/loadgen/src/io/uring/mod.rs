//! The io_uring engine (`--io uring`, Linux 6.0+): the plumbing its loops share (`ring`), the closed
//! loop's and echo flood's worker (`closed`), the open loop's backend (`open`), and the trial that
//! keeps `--coalesce-us auto`'s window only where it saves CPU (`window`). What travels on the
//! connections is the protocols' (`io::http`, `io::echo`), as on epoll.

pub mod closed;
pub mod open;
pub mod ring;
pub mod window;
