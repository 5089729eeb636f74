//! `--io uring`: the HTTP closed loop and the echo flood on io_uring instead of epoll (Linux 6.0+),
//! and the ring plumbing the open loop's io_uring backend (`open`) shares with them: the
//! ring, the provided-buffer ring, `user_data` with generations, the registered file table, the
//! error each failed completion is, and the cancellation at the end.
//!
//! Same contract as the epoll engine (`epoll` + `http`/`echo`): one ring per thread, shared
//! nothing, the same connection life cycle (ramp, backoff, replacement, `--timeout` sweep), the same
//! parser, verification and error classes. The engine is generic over `UringProtocol`: HTTP's is
//! `HttpParams` below, echo's is in `uring_echo`. What changes is how bytes move, chosen to cut the generator's
//! kernel time per request, which is what limits it on a small machine:
//!
//! - every connection has one multishot recv armed for its whole life, filling buffers from a
//!   provided-buffer ring: no recv syscall, no epoll bookkeeping, no re-arming per response; the
//!   buffers just freed are handed out again first, so they are still in cache (`BufRing`);
//! - sends are queued as SQEs with `MSG_WAITALL` (the kernel finishes short sends itself) and
//!   `IOSQE_CQE_SKIP_SUCCESS` (only a failed send produces a completion);
//! - sockets are registered files (slot i of the ring's file table is connection i's socket), so
//!   no operation looks a descriptor up or counts references on it (see `Worker::slot_fds`);
//! - all sends and re-arms produced by one batch of completions go to the kernel in the single
//!   `io_uring_enter` that also waits for the next batch;
//! - `SINGLE_ISSUER | DEFER_TASKRUN` (6.1+) let completions be processed in that same enter instead
//!   of by task-work interrupts of the running thread.
//!
//! - with `--coalesce-us`, each wait may hold out for half of the requests in flight for a window
//!   (io_uring min-wait, 6.12+): the biggest saving measured, but it makes arrivals burstier and adds
//!   up to the window to a response's measured latency. So it is opt-in; `auto` keeps the window at
//!   5% of the fastest recent latency (see `auto_window_us`), and uses it only while a trial of its
//!   CPU cost per response shows it saves (`window`); the largest window used is reported
//!   (`generator.batch_wait_max_us`) as the bound on what it added, and the share of the time it
//!   was used (`generator.batch_wait_share`).
//!
//! Connects are `IORING_OP_CONNECT` on blocking sockets, so `--close` works too.
//!
//! Latency is timed from the moment a request is queued to the moment the completion batch that
//! ends its response is reaped (one clock read per batch: every completion in it had already
//! happened by then).
//!
//! A closed connection may still have an armed recv, a queued send or a connect in the kernel.
//! Completions carry the connection's generation, so stale ones are ignored; the socket is shut
//! down first (which ends any operation pending on it) and its descriptor is closed only after the
//! next submit, so a queued SQE can never reach a new socket that reused the number.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use io_uring::types::{BufRingEntry, CancelBuilder, SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use socket2::{SockAddr, Socket};

use crate::config::{Coalesce, HttpConfig, IoSupport};
use crate::exchange::{Exchange, ExchangeConn, Outcome, Received};
use crate::io::http;
use crate::io::page::PageBuf;
use crate::io::uring::window::WindowTrial;
// The same ramp, back-off and time-keeping as the epoll engine (see io/worker.rs for the reasons).
use crate::io::worker::{
    after_failure, connect_failed, connection_finished, new_tcp_socket, ramp_room, sweep_action,
    Batching, ConnRules, LoopClock, Phase, SweepAction, WorkerConfig, WorkerResult,
    MAX_RAMP_CONNECTING,
};
use crate::stats::{ErrorClass, ThreadStats};
use crate::sys;

pub mod open;
pub mod window;

/// Bytes per provided receive buffer for HTTP. A response larger than this simply arrives in
/// several completions; 16 KiB keeps big bodies at few completions without much memory per thread.
/// (Echo's are larger: `UringProtocol::RECV_BUF_BYTES`.)
pub(crate) const HTTP_RECV_BUF_BYTES: usize = 16 * 1024;
/// Provided buffers per thread: twice the connections, within these bounds (a power of two, as the
/// kernel requires). Buffers go back to the ring after every batch, so running out only happens
/// when more than this many receives complete between two reaps; the recv then ends with ENOBUFS
/// and is simply re-armed.
pub(crate) const MIN_RECV_BUFS: usize = 64;
pub(crate) const MAX_RECV_BUFS: usize = 1024;
pub(crate) const BUF_GROUP: u16 = 0;
/// Submission queue entries per connection: a loop turn queues at most a connect, a recv re-arm and
/// a send for each; a full queue is submitted early, so this only sizes the common case.
pub(crate) const SQES_PER_CONN: usize = 3;
pub(crate) const MAX_SQ_ENTRIES: usize = 32768;
/// The kernel's IORING_MAX_CQ_ENTRIES: a larger completion queue is refused (EINVAL). Four times the
/// largest submission queue would be, so a thread with more than ~5,400 connections could not set
/// up its ring; a full completion queue is not lost (the kernel keeps the overflow and `push` reaps).
const MAX_CQ_ENTRIES: u32 = 65536;

pub(crate) const OP_CONNECT: u64 = 1;
pub(crate) const OP_RECV: u64 = 2;
pub(crate) const OP_SEND: u64 = 3;
pub(crate) const OP_FILES_UPDATE: u64 = 4;
pub(crate) const GEN_MASK: u32 = 0x00ff_ffff;

pub(crate) fn user_data(slot: usize, gen: u32, op: u64) -> u64 {
    ((slot as u64) << 32) | (u64::from(gen & GEN_MASK) << 8) | op
}

pub(crate) fn decode(ud: u64) -> (usize, u32, u64) {
    (
        (ud >> 32) as usize,
        ((ud >> 8) as u32) & GEN_MASK,
        ud & 0xff,
    )
}

/// Oldest kernel the engine relies on: multishot recv (6.0) and provided-buffer rings (5.19).
const MIN_KERNEL: (u32, u32) = (6, 0);

/// When the kernel does a ring's work (receives into provided buffers, completions): only inside
/// `io_uring_enter` (`DEFER_TASKRUN`), or at any return of the thread to user space.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum TaskRun {
    InsideEnter,
    Anytime,
}

/// Build a ring with the cheapest completion mode this kernel offers. The flags only change when
/// completions are processed, never what happens, so falling back among them is not a change of
/// behaviour (unlike falling back to epoll, which this never does).
pub(crate) fn build_ring(sq_entries: u32) -> io::Result<(IoUring, TaskRun)> {
    let cq_entries = sq_entries.saturating_mul(4).min(MAX_CQ_ENTRIES);
    let attempts: [fn(&mut io_uring::Builder); 4] = [
        // 6.6+: without the SQ index array the kernel reads SQEs in ring order, one less
        // indirection per submission.
        |b| {
            b.setup_single_issuer()
                .setup_defer_taskrun()
                .setup_no_sqarray();
        },
        |b| {
            b.setup_single_issuer().setup_defer_taskrun();
        },
        |b| {
            b.setup_coop_taskrun();
        },
        |_| {},
    ];
    let mut last = None;
    for (attempt, tune) in attempts.into_iter().enumerate() {
        let mut b = IoUring::builder();
        // CLAMP: at the largest queues (10000 connections on one thread) four completions per
        // entry exceed the kernel's completion queue limit (65536), which would refuse the ring;
        // clamped, a full queue is handled like any other (see `push`).
        b.setup_cqsize(cq_entries).setup_clamp().setup_submit_all();
        tune(&mut b);
        match b.build(sq_entries) {
            // The first two attempts set DEFER_TASKRUN.
            Ok(r) if attempt < 2 => return Ok((r, TaskRun::InsideEnter)),
            Ok(r) => return Ok((r, TaskRun::Anytime)),
            // EINVAL: a flag this kernel does not know; anything else will not get better.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.expect("at least one attempt"))
}

/// Probe io_uring as the engine uses it: a ring of the engine's kind, the operations it submits and a
/// provided-buffer ring.
pub fn support() -> IoSupport {
    let unavailable = IoSupport::Unavailable;
    if let Some((major, minor)) = kernel_version() {
        if (major, minor) < MIN_KERNEL {
            return unavailable(format!(
                "the kernel is {major}.{minor}; the uring engine needs Linux {}.{}+ (multishot recv, provided-buffer rings)",
                MIN_KERNEL.0, MIN_KERNEL.1
            ));
        }
    }
    let (ring, task_run) = match build_ring(8) {
        Ok(r) => r,
        Err(e) => return unavailable(setup_error_cause(&e)),
    };
    let mut p = io_uring::Probe::new();
    if let Err(e) = ring.submitter().register_probe(&mut p) {
        return unavailable(format!("cannot query the supported operations ({e})"));
    }
    for (code, name) in [
        (opcode::Connect::CODE, "CONNECT"),
        (opcode::Send::CODE, "SEND"),
        (opcode::RecvMulti::CODE, "RECV"),
    ] {
        if !p.is_supported(code) {
            return unavailable(format!("the kernel does not support IORING_OP_{name}"));
        }
    }
    match BufRing::new(&ring, MIN_RECV_BUFS, HTTP_RECV_BUF_BYTES, task_run) {
        Ok(mut b) => {
            if ring.submitter().unregister_buf_ring(BUF_GROUP).is_ok() {
                b.registered = false;
            }
        }
        Err(e) => return unavailable(format!("cannot register a provided-buffer ring ({e})")),
    }
    if ring.params().is_feature_min_timeout() {
        IoSupport::Full
    } else {
        IoSupport::NoMinWait
    }
}

fn setup_error_cause(e: &io::Error) -> String {
    let sysctl = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => format!(
            "io_uring_setup was refused ({e}); sysctl kernel.io_uring_disabled is {sysctl} (1: only members of kernel.io_uring_group, 2: nobody), or a seccomp filter forbids it"
        ),
        Some(libc::ENOSYS) => format!(
            "io_uring_setup does not exist here ({e}): a kernel without CONFIG_IO_URING, or a seccomp filter (e.g. a container runtime's default profile) hiding it"
        ),
        Some(libc::ENOMEM) => format!(
            "io_uring_setup ran out of memory ({e}); the locked-memory limit (ulimit -l) may be too low"
        ),
        _ => format!("io_uring_setup failed ({e}); sysctl kernel.io_uring_disabled is {sysctl}"),
    }
}

fn kernel_version() -> Option<(u32, u32)> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let mut parts = release.trim().split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// A provided-buffer ring (`IORING_REGISTER_PBUF_RING`): the kernel takes a buffer from its head for
/// every receive; we put it back at the tail once its bytes are parsed.
///
/// Hot first: handed back in plain ring order, every buffer waits behind all the others before it
/// is used again, so a thread cycles through the whole ring (256 × 16 KiB for 100 connections, four
/// times a core's L2) and the kernel's receive copy writes to memory that has left the cache; that
/// copy was the largest cost left in the echo flood. A turn of the loop only takes a few buffers
/// (about 7 per `io_uring_enter` in a 100-connection echo flood), so before each enter the buffers
/// recycled since the last one are written at the ring's head, most recent first, and the entries
/// they displace move to the tail: the kernel keeps reusing the same few, still-cached buffers.
/// This rewrites entries the kernel has not taken yet, so it needs to know exactly where the
/// kernel's head is and that the kernel reads nothing between two enters:
/// - only with `DEFER_TASKRUN` (`TaskRun::InsideEnter`): receives happen only inside enter;
/// - the head is the number of buffer-carrying completions reaped (`taken`), which is the kernel's
///   head only when no completion is waiting in the queue or in the kernel's overflow list; a turn
///   where one might be publishes in plain order, and after a completion-queue overflow (which may
///   drop completions) the ring stays in plain order for good;
/// - every `VERIFY_EVERY` rearrangements the head is checked against the kernel's own
///   (`IORING_REGISTER_PBUF_STATUS`, 6.8+) and a mismatch fails the thread instead of risking a
///   buffer handed out twice.
pub(crate) struct BufRing {
    ring: *mut BufRingEntry,
    ring_layout: std::alloc::Layout,
    /// The buffers, back to back, page-aligned (see `io::page`: the kernel copies into them).
    bufs: PageBuf,
    entries: u16,
    /// Bytes per buffer.
    buf_bytes: usize,
    tail: u16,
    /// None: plain ring order (no `DEFER_TASKRUN`, or after an overflow).
    hot_first: Option<HotFirst>,
    /// Registered with the kernel: memory must outlive the registration.
    pub(crate) registered: bool,
}

/// What hot-first ordering needs to know about the ring (see `BufRing`).
struct HotFirst {
    /// Ring entries the kernel has taken: buffer-carrying completions reaped (wrapping, like the
    /// kernel's head).
    head: u16,
    /// The buffer id written at each ring index.
    bid_at: Vec<u16>,
    /// Buffers recycled since the last publish, oldest first.
    recycled: Vec<u16>,
    /// The entries displaced from the head in this publish.
    displaced: Vec<u16>,
    /// Rearrangements since the last check against the kernel's head.
    unverified: u32,
}

/// How often (in rearranging publishes) the tracked head is compared with the kernel's: one
/// `io_uring_register` call per this many loop turns.
const VERIFY_EVERY: u32 = 64;

impl BufRing {
    pub(crate) fn new(
        uring: &IoUring,
        entries: usize,
        buf_bytes: usize,
        task_run: TaskRun,
    ) -> io::Result<BufRing> {
        debug_assert!(entries.is_power_of_two() && entries <= 32768);
        let ring_layout = std::alloc::Layout::from_size_align(
            entries * std::mem::size_of::<BufRingEntry>(),
            4096,
        )
        .expect("valid layout");
        // SAFETY: non-zero size; zeroed memory is a valid (empty) ring.
        let ring = unsafe { std::alloc::alloc_zeroed(ring_layout) } as *mut BufRingEntry;
        if ring.is_null() {
            return Err(io::Error::from(io::ErrorKind::OutOfMemory));
        }
        let mut br = BufRing {
            ring,
            ring_layout,
            bufs: PageBuf::zeroed(entries * buf_bytes),
            entries: entries as u16,
            buf_bytes,
            tail: 0,
            hot_first: None,
            registered: false,
        };
        // SAFETY: the ring memory is page aligned, sized for `entries`, and lives until Drop, which
        // unregisters it first.
        unsafe {
            uring.submitter().register_buf_ring_with_flags(
                ring as u64,
                entries as u16,
                BUF_GROUP,
                0,
            )?;
        }
        br.registered = true;
        for bid in 0..entries as u16 {
            br.write(bid, bid);
        }
        br.tail = entries as u16;
        if task_run == TaskRun::InsideEnter {
            br.hot_first = Some(HotFirst {
                head: 0,
                bid_at: (0..entries as u16).collect(),
                recycled: Vec::with_capacity(entries),
                displaced: Vec::with_capacity(entries),
                unverified: 0,
            });
        }
        br.store_tail();
        Ok(br)
    }

    /// Write buffer `bid` into ring position `pos` (wrapping).
    fn write(&self, pos: u16, bid: u16) {
        let idx = (pos & (self.entries - 1)) as usize;
        // SAFETY: idx < entries; positions from the tail on are not the kernel's until published,
        // and positions from the head on are not read by it outside an enter (see the type).
        let e = unsafe { &mut *self.ring.add(idx) };
        e.set_addr(self.bufs.as_ptr() as u64 + u64::from(bid) * self.buf_bytes as u64);
        e.set_len(self.buf_bytes as u32);
        e.set_bid(bid);
    }

    /// Count `n` buffer-carrying completions just reaped: the kernel took that many entries.
    pub(crate) fn taken(&mut self, n: usize) {
        if let Some(h) = self.hot_first.as_mut() {
            h.head = h.head.wrapping_add(n as u16);
        }
    }

    pub(crate) fn recycle(&mut self, bid: u16) {
        match self.hot_first.as_mut() {
            Some(h) => h.recycled.push(bid),
            None => {
                self.push_tail(bid);
            }
        }
    }

    /// Write `bid` at the tail and advance it (visible to the kernel at the next `store_tail`);
    /// returns the ring index it went to.
    fn push_tail(&mut self, bid: u16) -> usize {
        let idx = (self.tail & (self.entries - 1)) as usize;
        self.write(self.tail, bid);
        self.tail = self.tail.wrapping_add(1);
        idx
    }

    /// Make recycled buffers visible to the kernel (once per loop turn, right before the enter):
    /// hot first where the kernel's head is known, else at the tail in the order they came back.
    pub(crate) fn publish(&mut self, uring: &mut IoUring) -> io::Result<()> {
        if let Some(mut h) = self.hot_first.take() {
            if uring.submission().cq_overflow() {
                // Completions may have been dropped: the head can no longer be known. Plain order
                // from now on (`hot_first` stays None).
                self.append(&mut h);
            } else {
                // No completion waiting to be reaped: every buffer the kernel took is counted.
                let settled = uring.completion().is_empty();
                if settled {
                    self.hot_to_head(&mut h);
                    h.unverified += 1;
                } else {
                    self.append(&mut h);
                }
                h.recycled.clear();
                let verify = settled && h.unverified >= VERIFY_EVERY;
                if verify {
                    h.unverified = 0;
                }
                let head = h.head;
                self.hot_first = Some(h);
                if verify {
                    verify_head(uring, head)?;
                }
            }
        }
        self.store_tail();
        Ok(())
    }

    /// The recycled buffers at the head, most recent first; the entries they displace at the tail.
    fn hot_to_head(&mut self, h: &mut HotFirst) {
        let mask = self.entries - 1;
        let HotFirst {
            head,
            bid_at,
            recycled,
            displaced,
            ..
        } = h;
        let waiting = self.tail.wrapping_sub(*head);
        let swapped = (recycled.len() as u16).min(waiting);
        displaced.clear();
        // Most recently recycled first: its bytes were touched last.
        let mut hot = recycled.iter().rev().copied();
        for k in 0..swapped {
            let idx = (head.wrapping_add(k) & mask) as usize;
            displaced.push(bid_at[idx]);
            let bid = hot.next().expect("swapped <= recycled");
            self.write(head.wrapping_add(k), bid);
            bid_at[idx] = bid;
        }
        for bid in hot.chain(displaced.iter().copied()) {
            bid_at[self.push_tail(bid)] = bid;
        }
    }

    /// The recycled buffers at the tail, in the order they came back.
    fn append(&mut self, h: &mut HotFirst) {
        for &bid in &h.recycled {
            h.bid_at[self.push_tail(bid)] = bid;
        }
    }

    fn store_tail(&self) {
        // SAFETY: the tail field lives inside the first ring entry; the kernel reads it with acquire.
        unsafe {
            let tail = BufRingEntry::tail(self.ring) as *const std::sync::atomic::AtomicU16;
            (*tail).store(self.tail, std::sync::atomic::Ordering::Release);
        }
    }

    /// The bytes the kernel put in buffer `bid`.
    ///
    /// # Safety
    /// The buffer must have been handed back by a completion and not recycled yet; the slice must
    /// not be used after `recycle(bid)`.
    pub(crate) unsafe fn data(&self, bid: u16, len: usize) -> &'static [u8] {
        std::slice::from_raw_parts(
            self.bufs.as_ptr().add(bid as usize * self.buf_bytes),
            len.min(self.buf_bytes),
        )
    }
}

/// How many of these completions carry a provided buffer: each took one ring entry.
pub(crate) fn with_buffers<'a>(cqes: impl IntoIterator<Item = &'a (u64, i32, u32)>) -> usize {
    cqes.into_iter()
        .filter(|&&(_, _, flags)| cqueue::buffer_select(flags).is_some())
        .count()
}

/// Fail if `head` is not where the kernel's head of the buffer ring is (`IORING_REGISTER_PBUF_STATUS`,
/// Linux 6.8+; older kernels cannot tell, and the check is skipped).
fn verify_head(uring: &IoUring, head: u16) -> io::Result<()> {
    /// `struct io_uring_buf_status`.
    #[repr(C)]
    struct BufStatus {
        buf_group: u32,
        head: u32,
        resv: [u32; 8],
    }
    const IORING_REGISTER_PBUF_STATUS: libc::c_uint = 26;
    let mut status = BufStatus {
        buf_group: u32::from(BUF_GROUP),
        head: 0,
        resv: [0; 8],
    };
    // SAFETY: the argument is a valid io_uring_buf_status the kernel fills in; nr_args is 1.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            uring.as_raw_fd(),
            IORING_REGISTER_PBUF_STATUS,
            &mut status as *mut BufStatus,
            1,
        )
    };
    if rc < 0 {
        return Ok(());
    }
    if status.head as u16 != head {
        return Err(io::Error::other(format!(
            "internal error: the provided-buffer ring's head is {} in the kernel but {head} in the \
             generator; stopped rather than hand a buffer out twice",
            status.head as u16
        )));
    }
    Ok(())
}

impl Drop for BufRing {
    fn drop(&mut self) {
        if self.registered {
            // The ring's owner unregisters (or drops the io_uring) before this runs; see Worker.
            std::mem::forget(std::mem::take(&mut self.bufs));
            return;
        }
        // SAFETY: allocated in new() with this layout and no longer known to the kernel.
        unsafe { std::alloc::dealloc(self.ring as *mut u8, self.ring_layout) };
    }
}

/// Bytes a protocol wants sent: they stay where they are, unchanged, until the send completes (the
/// SQE points at them).
pub struct SendBuf {
    pub(crate) ptr: *const u8,
    pub(crate) len: usize,
    /// More bytes follow once these are sent: the send completes with a CQE on success too, and
    /// `next_send` is asked again then. Never two sends in flight on one connection: io_uring does
    /// not keep two sends on one socket in order when the first has to wait for buffer space.
    pub(crate) more: bool,
}

impl SendBuf {
    /// A slice the protocol keeps in place until the send completes.
    pub(crate) fn of(bytes: &[u8], more: bool) -> SendBuf {
        SendBuf {
            ptr: bytes.as_ptr(),
            len: bytes.len(),
            more,
        }
    }
}

/// What travels on a connection of this engine (HTTP below, echo in `uring_echo`): the io_uring
/// counterpart of `epoll::Protocol`. The engine owns the sockets, the ring and the connection life
/// cycle; the protocol judges the bytes that arrive and says what to send, and never does I/O.
pub trait UringProtocol: ConnRules {
    /// Bytes per provided receive buffer (a receive takes at most one buffer). Memory is only
    /// resident once the kernel has written into a buffer: with hot-first order (see `BufRing`) that
    /// is the few in use, in plain order every buffer of the ring.
    const RECV_BUF_BYTES: usize;
    /// The connection may have a send blocked in the kernel (its socket is shut down on close).
    fn sending(&self, c: &Self::Conn) -> bool;
    /// The connect completed: `send_next` to begin with a send (`next_send`).
    fn on_connected(
        &mut self,
        c: &mut Self::Conn,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Received;
    /// Bytes arrived (`send_next`: call `next_send`).
    fn on_bytes(
        &mut self,
        c: &mut Self::Conn,
        data: &[u8],
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Received;
    fn on_eof(&mut self, c: &mut Self::Conn, now: Instant, stats: &mut ThreadStats) -> Outcome;
    fn read_failed(&self, e: &io::Error) -> Outcome;
    fn write_failed(&self, e: &io::Error) -> Outcome;
    /// What to send now on the connection, if anything; counted as sent when queued (`MSG_WAITALL`
    /// sends it all or fails).
    fn next_send(
        &mut self,
        c: &mut Self::Conn,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Option<SendBuf>;
    /// The next wait's coalescing window in µs (0: react at once) and, with one, how many
    /// completions are worth waiting for; `now` is the loop's time.
    fn batch_wait(&mut self, now: Instant) -> (u32, usize);
}

/// Provided buffers for a thread of `connections`: twice as many, a power of two within bounds.
pub(crate) fn recv_buffers(connections: usize) -> usize {
    (connections * 2)
        .next_power_of_two()
        .clamp(MIN_RECV_BUFS, MAX_RECV_BUFS)
}

/// Submission queue entries for a thread of `connections` (see SQES_PER_CONN).
pub(crate) fn sq_entries(connections: usize) -> u32 {
    (connections * SQES_PER_CONN + 64)
        .next_power_of_two()
        .min(MAX_SQ_ENTRIES) as u32
}

/// A sparse registered file table of `n` slots (see `Worker::slot_fds`), or None when the kernel
/// refuses one (then plain descriptors).
pub(crate) fn register_files(ring: &IoUring, n: usize) -> Option<Vec<RawFd>> {
    u32::try_from(n)
        .ok()
        .filter(|&n| ring.submitter().register_files_sparse(n).is_ok())
        .map(|_| vec![-1; n])
}

/// The SQE that puts `fd` (-1: nothing) in slot i of the registered file table `table`, to be
/// queued like any other so it takes effect in submission order; None without a table. It points
/// at the table's entry, which must stay put until it is submitted. If a close and an open of the
/// same slot are queued together, both updates read the newest value when submitted: the old
/// socket leaves the table either way.
pub(crate) fn files_update(
    table: &mut Option<Vec<RawFd>>,
    i: usize,
    fd: RawFd,
) -> Option<squeue::Entry> {
    let slots = table.as_mut()?;
    slots[i] = fd;
    let sqe = opcode::FilesUpdate::new(&slots[i], 1)
        .offset(i as i32)
        .build()
        .flags(squeue::Flags::SKIP_SUCCESS)
        .user_data(user_data(i, 0, OP_FILES_UPDATE));
    Some(sqe)
}

/// The error a failed file-table update is (only failures complete, see `files_update`).
pub(crate) fn files_update_error(res: i32) -> io::Error {
    let e = io::Error::from_raw_os_error(-res);
    io::Error::new(e.kind(), format!("io_uring file table update: {e}"))
}

/// What a failed connect completion is: the epoll engine's class and message for the same errno.
pub(crate) fn connect_failure(res: i32, target: SocketAddr) -> Outcome {
    let e = io::Error::from_raw_os_error(-res);
    Outcome::Fail(
        ErrorClass::of_connect_error(&e),
        format!("connect to {target}: {e}"),
    )
}

/// The error of a failed completion (`res` < 0).
pub(crate) fn completion_error(res: i32) -> io::Error {
    io::Error::from_raw_os_error(-res)
}

/// A receive completion without data and without EOF: None when it is out of provided buffers
/// or interrupted (the multishot recv ended and is simply re-armed), else the read's error.
pub(crate) fn recv_error(res: i32) -> Option<io::Error> {
    (res != -libc::ENOBUFS && res != -libc::EINTR).then(|| completion_error(res))
}

/// Stop everything the kernel still does for a ring before its memory is freed: shut the
/// `sockets` down (ending whatever is pending on them), cancel what is left synchronously, then
/// unregister the buffer ring. If either fails, `BufRing`'s Drop leaks the buffers rather than free
/// memory the kernel may still write to (the process ends soon after anyway). The descriptors
/// (`graveyard` too) are closed last.
pub(crate) fn shut_down_all(
    ring: &mut IoUring,
    bufs: &mut BufRing,
    sockets: impl Iterator<Item = Socket>,
    graveyard: &mut Vec<Socket>,
) {
    for s in sockets {
        let _ = s.shutdown(std::net::Shutdown::Both);
        graveyard.push(s);
    }
    let _ = ring.submit();
    let cancelled = match ring
        .submitter()
        .register_sync_cancel(Some(Timespec::new().sec(1)), CancelBuilder::any())
    {
        Ok(()) => true,
        Err(e) => e.raw_os_error() == Some(libc::ENOENT),
    };
    if cancelled && ring.submitter().unregister_buf_ring(BUF_GROUP).is_ok() {
        bufs.registered = false;
    }
    graveyard.clear();
}

/// The HTTP exchange (shared with the epoll engine) and this engine's own setting.
pub struct HttpParams {
    ex: Exchange,
    coalesce: Coalesce,
    /// `--coalesce-us auto`: the current window (µs), starting at 0 until latencies are known.
    auto_window_us: u32,
    /// `--coalesce-us auto`: whether the window is used at all, tried against none by CPU time.
    trial: WindowTrial,
}

impl HttpParams {
    pub fn new(h: &HttpConfig, coalesce: Coalesce, thread_index: usize) -> HttpParams {
        HttpParams {
            ex: Exchange::for_config(h, thread_index),
            coalesce,
            auto_window_us: 0,
            trial: WindowTrial::default(),
        }
    }
}

impl ConnRules for HttpParams {
    type Conn = ExchangeConn;

    fn new_conn(&self, _index: usize) -> ExchangeConn {
        self.ex.new_conn()
    }

    fn nodelay(&self) -> bool {
        !self.ex.close_each()
    }

    fn replace_failed(&self) -> bool {
        true
    }

    fn reset(&mut self, c: &mut ExchangeConn) {
        self.ex.reset(c);
    }

    fn busy_since(&self, c: &ExchangeConn) -> Option<Instant> {
        self.ex.busy_since(c)
    }

    fn thread_done(&self, stats: &ThreadStats) -> bool {
        stats.quota_reached()
    }

    fn end_of_phase(
        &self,
        c: &ExchangeConn,
        connecting: bool,
        end: Instant,
        stats: &mut ThreadStats,
    ) {
        self.ex.end_of_phase(c, connecting, end, stats);
    }
}

impl UringProtocol for HttpParams {
    const RECV_BUF_BYTES: usize = HTTP_RECV_BUF_BYTES;

    fn sending(&self, c: &ExchangeConn) -> bool {
        self.ex.inflight(c) > 0
    }

    fn on_connected(
        &mut self,
        _c: &mut ExchangeConn,
        _now: Instant,
        _s: &mut ThreadStats,
    ) -> Received {
        Received::Ok { send_next: true }
    }

    fn on_bytes(
        &mut self,
        c: &mut ExchangeConn,
        data: &[u8],
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Received {
        self.ex.on_bytes(c, data, now, stats)
    }

    fn on_eof(&mut self, c: &mut ExchangeConn, now: Instant, stats: &mut ThreadStats) -> Outcome {
        self.ex.on_eof(c, now, stats)
    }

    fn read_failed(&self, e: &io::Error) -> Outcome {
        http::read_failed(e)
    }

    fn write_failed(&self, e: &io::Error) -> Outcome {
        http::write_failed(e)
    }

    /// The next batch of requests, if the `--requests` quota allows. The wire bytes stay where they
    /// are for the whole run (in the exchange, or in the connection's batch buffer, never
    /// reallocated).
    fn next_send(
        &mut self,
        c: &mut ExchangeConn,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Option<SendBuf> {
        let len = self.ex.start_batch(c, now, stats)?;
        stats.sent(now, len);
        Some(SendBuf::of(&self.ex.wire(c)[..len], false))
    }

    fn batch_wait(&mut self, now: Instant) -> (u32, usize) {
        let window_us = match self.coalesce {
            Coalesce::Off => 0,
            Coalesce::Fixed(us) => us,
            Coalesce::Auto => {
                if let Some(fastest) = self.ex.take_fastest_recent(AUTO_SAMPLE) {
                    self.auto_window_us = auto_window_us(fastest);
                }
                let completed = self.ex.completed_total();
                if self.trial.window_on(now, completed, sys::thread_cpu_time) {
                    self.auto_window_us
                } else {
                    0
                }
            }
        };
        // Half of what is in flight.
        (window_us, (self.ex.inflight_total() as usize / 2).max(1))
    }
}

/// `--coalesce-us auto`: responses per re-estimate of the window.
const AUTO_SAMPLE: u32 = 256;
/// `--coalesce-us auto`: the window is at most 1/AUTO_FRACTION_DIV (5%) of the fastest response
/// latency among the last AUTO_SAMPLE, so what batching adds to a measured latency stays within 5%
/// of it, far inside this machine's run-to-run noise (15-40%).
const AUTO_FRACTION_DIV: u128 = 20;
/// `--coalesce-us auto` never waits longer than this (most of the saving is reached well below).
const AUTO_MAX_US: u32 = 50;

/// The automatic coalescing window for a fastest recent latency: 5% of it, at most AUTO_MAX_US;
/// below 1 µs (sub-20 µs exchanges, e.g. one connection) there is no coalescing at all.
pub fn auto_window_us(fastest: Duration) -> u32 {
    (fastest.as_micros() / AUTO_FRACTION_DIV).min(u128::from(AUTO_MAX_US)) as u32
}

struct Conn<C> {
    sock: Option<Socket>,
    phase: Phase,
    gen: u32,
    backoff_ms: u32,
    source: Option<SocketAddr>,
    /// A multishot recv is queued or armed in the kernel for the current socket.
    recv_armed: bool,
    proto: C,
}

struct Worker<P: UringProtocol> {
    ring: IoUring,
    bufs: BufRing,
    conns: Vec<Conn<P::Conn>>,
    stats: ThreadStats,
    p: P,
    target: SocketAddr,
    /// Boxed: CONNECT SQEs point at it until they complete.
    target_sockaddr: Box<SockAddr>,
    timeout: Duration,
    live: usize,
    connecting: usize,
    /// The measured phase's largest window (the bound reported with the result), its time, and the
    /// part of that time whose waits had a window.
    batching: Batching,
    /// When the previous loop turn of the measured phase began, and whether its wait had a window.
    previous_turn: Option<(Instant, bool)>,
    /// Closed sockets whose descriptors are released after the next submit (see the module doc).
    graveyard: Vec<Socket>,
    /// Registered (fixed) files: connection i's socket sits in slot i of the ring's file table, so
    /// a send or recv names it by index and the kernel skips looking the descriptor up and
    /// counting references on every operation. None when the table could not be registered (then
    /// plain descriptors, as before). The slot is changed by an `IORING_OP_FILES_UPDATE` queued
    /// like any other SQE, so it takes effect in submission order: whatever was queued for the old
    /// socket still reaches the old socket. The vector holds what each update installs (one entry
    /// per slot, never reallocated: the SQE points at it until it is submitted).
    slot_fds: Option<Vec<RawFd>>,
    cqes: Vec<(u64, i32, u32)>,
}

/// Run one thread's share of the load (HTTP: `HttpParams`, echo: `echo::Echo`) on io_uring;
/// returns its measurements.
pub fn run_worker<P: UringProtocol>(cfg: WorkerConfig, p: P) -> io::Result<WorkerResult> {
    cfg.conns.pin_this_thread()?;
    let (ring, task_run) = build_ring(sq_entries(cfg.conns.connections))
        .map_err(|e| io::Error::new(e.kind(), format!("io_uring setup: {e}")))?;
    let bufs = BufRing::new(
        &ring,
        recv_buffers(cfg.conns.connections),
        P::RECV_BUF_BYTES,
        task_run,
    )
    .map_err(|e| io::Error::new(e.kind(), format!("io_uring buffer ring: {e}")))?;
    let slot_fds = register_files(&ring, cfg.conns.connections);
    let stats = cfg.new_stats();
    let conns = (0..cfg.conns.connections)
        .map(|k| Conn {
            sock: None,
            phase: Phase::New,
            gen: 0,
            backoff_ms: 0,
            source: cfg.conns.source_for(k),
            recv_armed: false,
            proto: p.new_conn(cfg.conns.first_conn + k),
        })
        .collect();
    let mut w = Worker {
        ring,
        bufs,
        conns,
        stats,
        p,
        target: cfg.conns.target,
        target_sockaddr: Box::new(SockAddr::from(cfg.conns.target)),
        timeout: cfg.conns.timeout,
        live: cfg.conns.connections,
        connecting: 0,
        batching: Batching::default(),
        previous_turn: None,
        graveyard: Vec::new(),
        slot_fds,
        cqes: Vec::with_capacity(1024),
    };
    let result = w.run(cfg.measure_start, cfg.measure_end, cfg.conns.cpu);
    w.shutdown();
    result
}

impl<P: UringProtocol> Worker<P> {
    fn run(
        &mut self,
        measure_start: Instant,
        measure_end: Option<Instant>,
        cpu: Option<usize>,
    ) -> io::Result<WorkerResult> {
        let mut clock = LoopClock::new(measure_start, measure_end);
        let mut never_opened = 0..self.conns.len();
        let stopped_at = loop {
            let now = Instant::now();
            let ramping = !never_opened.is_empty();
            for i in never_opened.by_ref().take(ramp_room(self.connecting)) {
                self.open(i, now)?;
            }
            clock.tick(now);
            if clock.past_end(now) || self.live == 0 || self.p.thread_done(&self.stats) {
                break now;
            }
            if clock.sweep_due(now) {
                self.sweep(now)?;
            }
            let wait = clock.wait(now, ramping && self.connecting < MAX_RAMP_CONNECTING);
            self.bufs.publish(&mut self.ring)?;
            let ts = Timespec::from(wait);
            let mut args = SubmitArgs::new().timespec(&ts);
            let mut want = 1;
            let (window_us, worth_waiting_for) = self.p.batch_wait(now);
            if clock.measuring() {
                let window = Duration::from_micros(u64::from(window_us));
                self.batching.max_window = self.batching.max_window.max(window);
                if let Some((then, windowed)) = self.previous_turn {
                    let turn = now.saturating_duration_since(then);
                    self.batching.time += turn;
                    if windowed {
                        self.batching.windowed_time += turn;
                    }
                }
                self.previous_turn = Some((now, window_us > 0));
            }
            if window_us > 0 {
                // Wait for half of what is in flight, but once the window has passed settle for
                // anything (IORING_ENTER_EXT_ARG min_wait, 6.12+): fewer, larger batches mean
                // fewer wake-ups on both sides, at the price of up to the window added to the
                // measured latency of a response that waits for the batch.
                want = worth_waiting_for;
                args = args.min_wait_usec(window_us);
            }
            match self.ring.submitter().submit_with_args(want, &args) {
                Ok(_) => {}
                Err(e) => match e.raw_os_error() {
                    // ETIME: the wait ran out (a sweep or the end is due); EINTR: a signal;
                    // EBUSY: completions must be reaped before more can be submitted.
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY) => {}
                    _ => return Err(io::Error::new(e.kind(), format!("io_uring_enter: {e}"))),
                },
            }
            // Only once every queued SQE naming their descriptors has reached the kernel.
            if self.ring.submission().is_empty() {
                self.graveyard.clear();
            }
            self.reap()?;
        };
        if clock.measuring() {
            let end = clock.measured_end(stopped_at);
            let by_time = clock.past_end(stopped_at);
            for c in &self.conns {
                if let Some(connecting) = c.phase.waiting_at_end(by_time) {
                    self.p
                        .end_of_phase(&c.proto, connecting, end, &mut self.stats);
                }
            }
        }
        // As the epoll engine does: the live interval histogram joins the finished ones.
        self.stats.intervals.flush();
        // The worker lives on to cancel its kernel work (see shutdown); its counters leave now.
        let empty_window = Instant::now();
        let stats = std::mem::replace(
            &mut self.stats,
            ThreadStats::new(empty_window, empty_window, None),
        );
        Ok(clock.result(stats, cpu, stopped_at, Some(self.batching)))
    }

    /// Process every completion available; one clock read serves the whole batch.
    fn reap(&mut self) -> io::Result<()> {
        let mut cqes = std::mem::take(&mut self.cqes);
        loop {
            cqes.clear();
            cqes.extend(
                self.ring
                    .completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            if cqes.is_empty() {
                break;
            }
            self.bufs.taken(with_buffers(&cqes));
            let now = Instant::now();
            for &(ud, res, flags) in &cqes {
                self.on_cqe(ud, res, flags, now)?;
            }
        }
        self.cqes = cqes;
        Ok(())
    }

    fn on_cqe(&mut self, ud: u64, res: i32, flags: u32, now: Instant) -> io::Result<()> {
        let (i, gen, op) = decode(ud);
        if op == OP_FILES_UPDATE {
            // Only a failure completes (SKIP_SUCCESS); the table is sized for every slot, so this
            // would be a kernel refusing what it accepted at setup.
            return Err(files_update_error(res));
        }
        let bid = cqueue::buffer_select(flags);
        let current = self
            .conns
            .get(i)
            .is_some_and(|c| c.gen == gen && c.sock.is_some());
        if !current {
            if let Some(bid) = bid {
                self.bufs.recycle(bid);
            }
            return Ok(());
        }
        let out = match op {
            OP_CONNECT => self.on_connect(i, res, now)?,
            OP_RECV => {
                let more = cqueue::more(flags);
                if !more {
                    self.conns[i].recv_armed = false;
                }
                let out = match bid {
                    Some(bid) => {
                        // SAFETY: the kernel handed this buffer back in this completion; it is
                        // recycled right after and the slice does not outlive this block.
                        let data = unsafe { self.bufs.data(bid, res.max(0) as usize) };
                        let out = self.on_data(i, data, now)?;
                        self.bufs.recycle(bid);
                        out
                    }
                    None if res == 0 => self.on_eof(i, now)?,
                    None => recv_error(res).map_or(Outcome::Ok, |e| self.p.read_failed(&e)),
                };
                let c = &self.conns[i];
                if matches!(out, Outcome::Ok)
                    && !c.recv_armed
                    && c.gen == gen
                    && matches!(c.phase, Phase::Open)
                {
                    self.arm_recv(i)?;
                }
                out
            }
            OP_SEND if res < 0 => self.p.write_failed(&completion_error(res)),
            // A send that asked for its completion (`SendBuf::more`) is done: the next one may go.
            OP_SEND => {
                self.send(i, now)?;
                Outcome::Ok
            }
            _ => Outcome::Ok,
        };
        self.apply(i, out, now)
    }

    fn on_connect(&mut self, i: usize, res: i32, now: Instant) -> io::Result<Outcome> {
        if res < 0 {
            return Ok(connect_failure(res, self.target));
        }
        self.conns[i].phase = Phase::Open;
        self.connecting -= 1;
        self.stats.connection_opened(now);
        self.arm_recv(i)?;
        let c = &mut self.conns[i];
        let begun = self.p.on_connected(&mut c.proto, now, &mut self.stats);
        self.after_received(i, begun, now)
    }

    fn on_data(&mut self, i: usize, data: &[u8], now: Instant) -> io::Result<Outcome> {
        let c = &mut self.conns[i];
        c.backoff_ms = 0;
        let judged = self.p.on_bytes(&mut c.proto, data, now, &mut self.stats);
        self.after_received(i, judged, now)
    }

    fn after_received(&mut self, i: usize, r: Received, now: Instant) -> io::Result<Outcome> {
        match r {
            Received::Stop(out) => Ok(out),
            Received::Ok { send_next } => {
                if send_next {
                    self.send(i, now)?;
                }
                Ok(Outcome::Ok)
            }
        }
    }

    fn on_eof(&mut self, i: usize, now: Instant) -> io::Result<Outcome> {
        Ok(self
            .p
            .on_eof(&mut self.conns[i].proto, now, &mut self.stats))
    }

    /// Queue what the protocol has to send on connection i, if anything.
    fn send(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let c = &mut self.conns[i];
        let Some(SendBuf { ptr, len, more }) = self.p.next_send(&mut c.proto, now, &mut self.stats)
        else {
            return Ok(());
        };
        let flags = libc::MSG_WAITALL | libc::MSG_NOSIGNAL;
        let sqe = if self.slot_fds.is_some() {
            opcode::Send::new(types::Fixed(i as u32), ptr, len as u32)
                .flags(flags)
                .build()
        } else {
            let fd = c.sock.as_ref().expect("open connection").as_raw_fd();
            opcode::Send::new(types::Fd(fd), ptr, len as u32)
                .flags(flags)
                .build()
        };
        // Only a failed send completes, unless the protocol has more to send after this one.
        let sqe = if more {
            sqe
        } else {
            sqe.flags(squeue::Flags::SKIP_SUCCESS)
        }
        .user_data(user_data(i, c.gen, OP_SEND));
        self.push(sqe)
    }

    fn arm_recv(&mut self, i: usize) -> io::Result<()> {
        let c = &mut self.conns[i];
        c.recv_armed = true;
        let sqe = if self.slot_fds.is_some() {
            opcode::RecvMulti::new(types::Fixed(i as u32), BUF_GROUP).build()
        } else {
            let fd = c.sock.as_ref().expect("open connection").as_raw_fd();
            opcode::RecvMulti::new(types::Fd(fd), BUF_GROUP).build()
        }
        .user_data(user_data(i, c.gen, OP_RECV));
        self.push(sqe)
    }

    fn push(&mut self, sqe: squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every buffer and address an SQE points at (request bytes, target address,
            // buffer ring) lives as long as the worker, which cancels everything before freeing.
            if unsafe { self.ring.submission().push(&sqe) }.is_ok() {
                return Ok(());
            }
            if let Err(e) = self.ring.submit() {
                if e.raw_os_error() != Some(libc::EBUSY) {
                    return Err(io::Error::new(e.kind(), format!("io_uring_enter: {e}")));
                }
                // The completion queue is full: reap some completions to make room later.
                // Their processing may queue SQEs too, which this loop keeps submitting.
                self.reap()?;
            }
        }
    }

    fn apply(&mut self, i: usize, out: Outcome, now: Instant) -> io::Result<()> {
        match out {
            Outcome::Ok => Ok(()),
            Outcome::Reconnect => {
                self.close(i, now)?;
                self.conns[i].backoff_ms = 0;
                self.open(i, now)
            }
            Outcome::Finished => {
                self.close(i, now)?;
                self.conns[i].phase = Phase::Done;
                self.live -= 1;
                connection_finished(&mut self.stats, now);
                Ok(())
            }
            Outcome::Fail(class, msg) => self.fail(i, now, class, msg),
        }
    }

    fn fail(&mut self, i: usize, now: Instant, class: ErrorClass, msg: String) -> io::Result<()> {
        self.stats.error(now, class, || msg);
        self.close(i, now)?;
        let c = &mut self.conns[i];
        c.phase = after_failure(self.p.replace_failed(), &mut c.backoff_ms, now);
        if matches!(c.phase, Phase::Done) {
            self.live -= 1;
        }
        Ok(())
    }

    fn close(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let c = &mut self.conns[i];
        let connecting = matches!(c.phase, Phase::Connecting { .. });
        if connecting {
            self.connecting -= 1;
        }
        let had_socket = if let Some(sock) = c.sock.take() {
            // Ends a connect, an armed recv or a blocked send still holding the socket in the
            // kernel; without it the socket would stay open until the peer sent something.
            if c.recv_armed || connecting || self.p.sending(&c.proto) {
                let _ = sock.shutdown(std::net::Shutdown::Both);
            }
            self.graveyard.push(sock);
            true
        } else {
            false
        };
        self.p.reset(&mut c.proto);
        c.recv_armed = false;
        c.gen = c.gen.wrapping_add(1) & GEN_MASK;
        c.phase = Phase::Idle { retry_at: now };
        if had_socket {
            // Empty the slot too: the table holds its own reference to the socket, which would
            // otherwise keep it open (no FIN to the server) until the slot is reused.
            self.set_slot(i, -1)?;
        }
        Ok(())
    }

    /// Put `fd` (-1: nothing) in connection i's slot of the registered file table, in submission
    /// order (see `slot_fds`). Without a table, nothing to do.
    fn set_slot(&mut self, i: usize, fd: RawFd) -> io::Result<()> {
        match files_update(&mut self.slot_fds, i, fd) {
            Some(sqe) => self.push(sqe),
            None => Ok(()),
        }
    }

    fn open(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let nodelay = self.p.nodelay();
        match new_socket(self.target, self.conns[i].source, nodelay) {
            Ok(sock) => {
                let fd: RawFd = sock.as_raw_fd();
                self.set_slot(i, fd)?;
                let fixed = self.slot_fds.is_some();
                let c = &mut self.conns[i];
                c.sock = Some(sock);
                c.phase = Phase::Connecting { since: now };
                self.connecting += 1;
                let (addr, len) = (self.target_sockaddr.as_ptr(), self.target_sockaddr.len());
                let sqe = if fixed {
                    opcode::Connect::new(types::Fixed(i as u32), addr, len).build()
                } else {
                    opcode::Connect::new(types::Fd(fd), addr, len).build()
                }
                .user_data(user_data(i, c.gen, OP_CONNECT));
                self.push(sqe)
            }
            Err(e) => {
                let (class, msg) = connect_failed(&e, self.target, self.conns[i].source);
                self.fail(i, now, class, msg)
            }
        }
    }

    fn sweep(&mut self, now: Instant) -> io::Result<()> {
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            let busy_since = self.p.busy_since(&c.proto);
            match sweep_action(&c.phase, busy_since, now, self.timeout, self.target) {
                SweepAction::Fail(class, msg) => self.fail(i, now, class, msg)?,
                SweepAction::Reopen => self.open(i, now)?,
                SweepAction::Nothing => {}
            }
        }
        Ok(())
    }

    /// Stop everything the kernel still does for this thread before its memory is freed: shut the
    /// sockets down, cancel what is left synchronously, then unregister the buffer ring.
    fn shutdown(&mut self) {
        let sockets = self.conns.iter_mut().filter_map(|c| c.sock.take());
        shut_down_all(&mut self.ring, &mut self.bufs, sockets, &mut self.graveyard);
    }
}

/// A blocking TCP socket, bound to `source` if given, not yet connected (IORING_OP_CONNECT does
/// that). Blocking: io_uring waits for readiness itself, and a blocking socket lets `MSG_WAITALL`
/// finish short sends in the kernel.
pub(crate) fn new_socket(
    target: SocketAddr,
    source: Option<SocketAddr>,
    nodelay: bool,
) -> io::Result<Socket> {
    new_tcp_socket(target, source, nodelay, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_round_trips() {
        for (slot, gen, op) in [
            (0, 0, OP_CONNECT),
            (123_456, GEN_MASK, OP_SEND),
            (7, 5, OP_RECV),
        ] {
            assert_eq!(decode(user_data(slot, gen, op)), (slot, gen, op));
        }
        // The generation wraps within its bits instead of spilling into the slot number.
        assert_eq!(decode(user_data(3, GEN_MASK + 2, OP_RECV)), (3, 1, OP_RECV));
    }

    /// The largest ring a thread asks for (thousands of connections) is one the kernel accepts.
    #[test]
    fn the_largest_ring_can_be_set_up() {
        if let IoSupport::Unavailable(why) = support() {
            crate::sys::feature_missing(&format!("io_uring is not usable here ({why})"));
            return;
        }
        build_ring(MAX_SQ_ENTRIES as u32).expect("a ring of MAX_SQ_ENTRIES");
    }

    /// Three loopback connections with data waiting on each, so a single-shot buffer-selecting
    /// recv on each completes at once; `rounds` turns of: arm the three recvs, enter, reap, recycle,
    /// publish. Returns every buffer id the kernel handed out, after checking the tracked head
    /// against the kernel's at every turn where hot-first ordering is on.
    fn buffers_used(ring: &mut IoUring, bufs: &mut BufRing, rounds: usize) -> Vec<u16> {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut writers = Vec::new();
        let mut readers = Vec::new();
        for _ in 0..3 {
            writers.push(std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap());
            readers.push(listener.accept().unwrap().0);
        }
        let mut used = Vec::new();
        for _ in 0..rounds {
            for (w, r) in writers.iter_mut().zip(&readers) {
                w.write_all(&[7u8; 100]).unwrap();
                let sqe = opcode::Recv::new(types::Fd(r.as_raw_fd()), std::ptr::null_mut(), 100)
                    .buf_group(BUF_GROUP)
                    .build()
                    .flags(squeue::Flags::BUFFER_SELECT);
                // SAFETY: no user buffer; the provided buffers live as long as `bufs`.
                unsafe { ring.submission().push(&sqe).unwrap() };
            }
            bufs.publish(ring).unwrap();
            ring.submit_and_wait(3).unwrap();
            let cqes: Vec<(u64, i32, u32)> = ring
                .completion()
                .map(|c| (c.user_data(), c.result(), c.flags()))
                .collect();
            assert_eq!(cqes.len(), 3, "{cqes:?}");
            bufs.taken(with_buffers(&cqes));
            for &(_, res, flags) in &cqes {
                assert_eq!(res, 100);
                let bid = cqueue::buffer_select(flags).expect("a provided buffer");
                // SAFETY: handed back by this completion, not recycled yet.
                assert_eq!(unsafe { bufs.data(bid, 100) }, &[7u8; 100][..]);
                used.push(bid);
                bufs.recycle(bid);
            }
            if let Some(h) = &bufs.hot_first {
                verify_head(ring, h.head).expect("tracked head is the kernel's");
            }
        }
        bufs.publish(ring).unwrap();
        used
    }

    fn distinct(bids: &[u16]) -> usize {
        bids.iter().collect::<std::collections::HashSet<_>>().len()
    }

    /// With `DEFER_TASKRUN` the buffers just recycled go back to the ring's head: three receives a
    /// turn keep using the same three buffers. Without it the ring is used in plain order and every
    /// one of its 64 buffers comes round.
    #[test]
    fn recycled_buffers_are_reused_first_where_the_kernel_takes_them_only_inside_enter() {
        if let IoSupport::Unavailable(why) = support() {
            crate::sys::feature_missing(&format!("io_uring is not usable here ({why})"));
            return;
        }
        let (mut ring, task_run) = build_ring(8).unwrap();
        if task_run != TaskRun::InsideEnter {
            crate::sys::feature_missing("this kernel has no DEFER_TASKRUN");
            return;
        }
        let mut bufs = BufRing::new(&ring, 64, HTTP_RECV_BUF_BYTES, task_run).unwrap();
        assert!(bufs.hot_first.is_some());
        let used = buffers_used(&mut ring, &mut bufs, 100);
        assert_eq!(distinct(&used), 3, "{used:?}");
        assert!(ring.submitter().unregister_buf_ring(BUF_GROUP).is_ok());
        bufs.registered = false;

        let mut plain_ring = IoUring::new(8).unwrap();
        let mut plain =
            BufRing::new(&plain_ring, 64, HTTP_RECV_BUF_BYTES, TaskRun::Anytime).unwrap();
        assert!(plain.hot_first.is_none());
        let used = buffers_used(&mut plain_ring, &mut plain, 100);
        assert_eq!(distinct(&used), 64);
        assert!(plain_ring
            .submitter()
            .unregister_buf_ring(BUF_GROUP)
            .is_ok());
        plain.registered = false;
    }

    /// The check that stops a thread before it could hand a buffer out twice does fire.
    #[test]
    fn a_head_out_of_step_with_the_kernel_is_an_error() {
        if !matches!(kernel_version(), Some(v) if v >= (6, 8))
            || !matches!(support(), IoSupport::Full | IoSupport::NoMinWait)
        {
            crate::sys::feature_missing(
                "no IORING_REGISTER_PBUF_STATUS (Linux 6.8+) or no io_uring here",
            );
            return;
        }
        let (ring, task_run) = build_ring(8).unwrap();
        let mut bufs = BufRing::new(&ring, 64, HTTP_RECV_BUF_BYTES, task_run).unwrap();
        verify_head(&ring, 0).expect("nothing taken yet");
        let e = verify_head(&ring, 5).unwrap_err();
        assert!(
            e.to_string().contains("head is 0 in the kernel but 5"),
            "{e}"
        );
        assert!(ring.submitter().unregister_buf_ring(BUF_GROUP).is_ok());
        bufs.registered = false;
    }

    #[test]
    fn auto_window_is_five_percent_of_the_fastest_latency_capped() {
        let us = Duration::from_micros;
        assert_eq!(
            auto_window_us(us(19)),
            0,
            "one fast connection: no coalescing"
        );
        assert_eq!(auto_window_us(us(40)), 2);
        assert_eq!(auto_window_us(us(700)), 35);
        assert_eq!(auto_window_us(us(5_000)), AUTO_MAX_US);
        assert_eq!(auto_window_us(Duration::MAX), AUTO_MAX_US);
    }
}
