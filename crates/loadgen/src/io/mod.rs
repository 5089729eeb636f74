//! Moving bytes: the engines (`epoll`, `uring`) and what they share (`worker`), the protocols the
//! epoll engine drives (`http`, `echo`; `echo` also holds the echo flood's rules both engines
//! follow), and the echo flood on io_uring (`uring_echo`; HTTP on io_uring is in `uring`). No
//! load-model decision is made here: when a request goes out is the load model's (`load`), what the
//! bytes mean is the exchange's.

pub mod echo;
pub mod epoll;
pub mod http;
pub mod open_io;
pub mod page;
pub mod uring;
pub mod uring_echo;
pub mod worker;
