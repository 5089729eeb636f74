//! Moving bytes: the engines (`epoll`; `uring`, with its ring plumbing, closed-loop worker, open-loop
//! backend, send stage and coalescing trial) and what they share (`worker`), the one place `--io`'s
//! engine is chosen for a load thread (`on_engine`), each protocol on both engines (`http`, `echo`;
//! `echo` also holds the echo flood's rules both engines follow), the open loop's I/O interface with
//! its epoll backend (`open_io`), https's TLS layer between the connection's bytes and the exchange
//! (`tls`, both engines), and page-aligned buffers (`page`). No load-model decision is made here: when
//! a request goes out is the load model's (`load`), what the bytes mean is the exchange's.

pub mod echo;
pub mod epoll;
pub mod http;
pub mod open_io;
pub mod page;
pub mod tls;
pub mod uring;
pub mod worker;

use crate::config::IoBackend;

/// A load thread's work, written once per engine: the closed loop and echo build their protocol for
/// `epoll::run_worker` or `uring::closed::run_worker`, the open loop its `OpenIo` backend. A new
/// engine adds a method here, and the compiler names every load model that must say how it runs there.
pub trait OnEngine {
    type Output;
    fn epoll(self) -> Self::Output;
    fn uring(self) -> Self::Output;
}

/// The one place the engine `--io` resolved to (`Config::io`) is chosen for a load thread.
pub fn on_engine<W: OnEngine>(io: IoBackend, work: W) -> W::Output {
    match io {
        IoBackend::Epoll => work.epoll(),
        IoBackend::Uring => work.uring(),
    }
}
