//! The echo flood on the io_uring engine (`--io uring`, and `--io auto` where io_uring is usable):
//! the rules of `echo::Echo` (what to send, how echoed bytes are judged and counted), driven by the
//! engine of `uring` (one multishot recv per connection into the provided-buffer ring, registered
//! files, generations in the completions, shutdown before close).
//!
//! Sends are plain `IORING_OP_SEND`s of the pattern's `'static` slices with `MSG_WAITALL`: the
//! kernel finishes a send that found the socket full itself, so a chunk of at most one slice
//! (64 KiB) is one SQE and no completion (`IOSQE_CQE_SKIP_SUCCESS`). A longer chunk goes out one
//! slice at a time, each asking for its completion before the next is queued (see `SendBuf::more`).
//! The bytes are copied into the socket as the epoll engine's write() copies them. Handing the
//! pattern's pages to the socket without a copy measured dearer (bench/RESULTS.md, 2026-11-27): from
//! this engine, synchronous vmsplice + splice before the ring's send gave 0.84x the reference
//! client's bytes per CPU-second and sendfile() from a memfd 0.84x, against 0.96x for the plain
//! send; on epoll see `echo::EchoProtocol`. `IORING_OP_SPLICE` was not tried: the kernel always
//! runs it in an io_uring worker thread.
//!
//! No coalescing window: that window waits for half of the requests in flight to be answered, and
//! an echo connection has a single chunk in flight whose echo comes back in as many completions as
//! the kernel hands it over in (usually one 64 KiB buffer per 32 KiB chunk, sometimes more): there is
//! no count of answers to wait for, so completions are handled as they come.

use std::io;
use std::time::Instant;

use crate::exchange::{Outcome, Received};
use crate::io::echo::{self, Echo, EchoConn};
use crate::io::uring::{SendBuf, UringProtocol};
use crate::io::worker::ConnRules;
use crate::stats::ThreadStats;

/// `Echo`'s connection rules (`ConnRules`) serve this engine as they are; here is how its bytes
/// move on io_uring.
impl UringProtocol for Echo {
    /// The epoll engine's read size: a 32 KiB chunk's echo arrives in one completion instead of two
    /// 16 KiB ones (half the completions and verification calls). With the ring handing the same
    /// few buffers out again (hot first, see `uring::BufRing`) the larger buffers stay in cache;
    /// in plain ring order they did not (bench/RESULTS.md, 2026-11-26/27).
    const RECV_BUF_BYTES: usize = echo::SLICE_BYTES;

    fn sending(&self, c: &EchoConn) -> bool {
        self.busy_since(c).is_some()
    }

    fn on_connected(&mut self, c: &mut EchoConn, now: Instant, _s: &mut ThreadStats) -> Received {
        Echo::on_connected(self, c, now)
    }

    fn on_bytes(
        &mut self,
        c: &mut EchoConn,
        data: &[u8],
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Received {
        Echo::on_bytes(self, c, data, now, stats)
    }

    fn on_eof(&mut self, c: &mut EchoConn, _now: Instant, _s: &mut ThreadStats) -> Outcome {
        Echo::on_eof(self, c)
    }

    fn read_failed(&self, e: &io::Error) -> Outcome {
        Echo::read_failed(self, e)
    }

    fn write_failed(&self, e: &io::Error) -> Outcome {
        Echo::write_failed(self, e)
    }

    /// The current chunk's next slice; counted as sent now (`MSG_WAITALL`: all of it or an error).
    fn next_send(
        &mut self,
        c: &mut EchoConn,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Option<SendBuf> {
        let data = self.unsent(c)?;
        self.sent(c, data.len(), now, stats);
        Some(SendBuf::of(data, self.unsent(c).is_some()))
    }

    fn batch_wait(&mut self, _now: Instant) -> (u32, usize) {
        (0, 1)
    }
}
