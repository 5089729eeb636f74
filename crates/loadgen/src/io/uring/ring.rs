//! The io_uring plumbing both of its loops share (the closed loop's worker in `closed`, the open
//! loop's backend in `open`): the ring and the probe of what this kernel offers (`support`), the
//! provided-buffer ring (`BufRing`), `user_data` with generations, the registered file table, the
//! error each failed completion is, the blocking sockets, and the cancellation at the end
//! (`shut_down_all`).

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};

use io_uring::types::{BufRingEntry, CancelBuilder, Timespec};
use io_uring::{cqueue, opcode, squeue, IoUring};
use socket2::Socket;

use crate::config::IoSupport;
use crate::exchange::Outcome;
use crate::io::page::PageBuf;
use crate::io::worker::new_tcp_socket;
use crate::stats::ErrorClass;

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
    use io_uring::types;

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
}
