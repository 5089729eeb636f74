//! The open loop's bytes on io_uring (`OpenIo` for `--io uring`); the schedule is `load::open`'s,
//! the same as on epoll. Only on request: `--io auto` keeps the open loop on epoll, which measured
//! cheaper (about 28% less CPU at the same spin window) and more punctual (bench/RESULTS.md).
//!
//! The closed loop's mechanics (`closed`, over `ring`): one ring per thread, registered files (slot i of the
//! ring's file table is slot i's socket), connects as `IORING_OP_CONNECT` on blocking sockets, one
//! multishot recv per connection filling buffers from a provided-buffer ring, sends as SQEs with
//! `MSG_WAITALL` and `IOSQE_CQE_SKIP_SUCCESS`, generations in `user_data` so completions for a
//! closed socket are dropped, shutdown before close and descriptors released only after the next
//! submit. What the open loop adds is its own way of waiting:
//!
//! - a timed wait is one `io_uring_enter` that submits what is queued and sleeps until the first
//!   completion or the wake-up time (the `SubmitArgs` timeout), so the send queued by the schedule
//!   and the wait for the next send time are one syscall;
//! - a spin turn (`--spin-us`) only looks: one `io_uring_enter` with GETEVENTS and no minimum,
//!   which submits what is queued and posts the completions that are ready without sleeping (the
//!   counterpart of epoll_wait with a zero timeout). A look at the completion queue alone would not
//!   do: with `DEFER_TASKRUN` completions are only posted by an enter carrying GETEVENTS.
//!
//! No coalescing (`--coalesce-us`): waiting for more completions would add to the latency the
//! schedule measures.
//!
//! https and HTTP/2 go through the epoll engine's code (`io::http::flush`, `io::http::receive_staged`,
//! with `io::tls`) into each slot's send stage (`uring::stage`): one send at a time, each
//! completing, and its completion is the `IoEvent::Writable` that stages and sends what came
//! meanwhile, as epoll's writable edge does.
//!
//! A request's send is queued when the schedule dispatches it and reaches the kernel at the next
//! wait, which follows at once (the loop has nothing else to do in between); its send time is the
//! dispatch's clock reading, as on epoll. Responses are timed at the reap of the completion batch
//! that holds them, as in the closed loop (every completion in it had happened by then).

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use io_uring::types::{SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use socket2::{SockAddr, Socket};

use crate::exchange::{Exchange, ExchangeConn, Outcome, Received};
use crate::io::http::{self, WriteState};
use crate::io::open_io::{IoEvent, OpenIo};
use crate::io::uring::ring::{
    build_ring, completion_error, connect_failure, decode, files_update, files_update_error,
    new_socket, recv_buffers, recv_error, register_files, shut_down_all, sq_entries, user_data,
    with_buffers, BufRing, BUF_GROUP, GEN_MASK, HTTP_RECV_BUF_BYTES, OP_CONNECT, OP_FILES_UPDATE,
    OP_RECV, OP_SEND,
};
use crate::io::uring::stage::{Arrived, SendStage};
use crate::io::worker::connect_failed;
use crate::stats::{ErrorClass, ThreadStats};

/// One completed receive, handed to `receive`: the buffer it filled (if any) and its result.
#[derive(Clone, Copy, Debug)]
pub struct RecvDone {
    bid: Option<u16>,
    res: i32,
}

/// How an SQE names a socket (the opcode builders take either type).
enum File {
    Fixed(types::Fixed),
    Fd(types::Fd),
}

struct Slot {
    sock: Option<Socket>,
    gen: u32,
    connecting: bool,
    /// A multishot recv is queued or armed in the kernel for the current socket.
    recv_armed: bool,
    /// https: the TLS session; the batch being written (with https or `--h2`, see `stage`).
    w: WriteState,
    /// https, `--h2`: the bytes going out (`io::http::needs_stage`).
    stage: SendStage,
}

pub struct UringOpen {
    ring: IoUring,
    bufs: BufRing,
    slots: Vec<Slot>,
    /// Slots may grow up to this (the registered file table and the queues are sized for it).
    capacity: usize,
    target: SocketAddr,
    /// Boxed: CONNECT SQEs point at it until they complete.
    target_sockaddr: Box<SockAddr>,
    /// See `uring::closed::Worker::slot_fds` (sized for `capacity`, never reallocated).
    slot_fds: Option<Vec<RawFd>>,
    /// Closed sockets whose descriptors are released after the next submit.
    graveyard: Vec<Socket>,
    /// Completions reaped and not yet taken by `next_event`.
    cqes: VecDeque<(u64, i32, u32)>,
    /// Slots whose multishot recv ended (out of buffers, interrupted): re-armed at the next wait
    /// if the worker kept the connection (same generation).
    rearm: Vec<(usize, u32)>,
    /// When the last batch of completions was reaped: the receive time of the bytes in it.
    reaped_at: Instant,
    /// An error found while taking events (a refused file-table update), returned by the next wait.
    failed: Option<io::Error>,
    /// https: the plaintext of the records a receive brought.
    scratch: Vec<u8>,
}

/// `IORING_ENTER_GETEVENTS` (include/uapi/linux/io_uring.h): post what has completed.
const ENTER_GETEVENTS: u32 = 1;

impl UringOpen {
    /// A ring for at most `capacity` connection slots to `target` (none yet: `add_slot`).
    pub fn new(target: SocketAddr, capacity: usize) -> io::Result<Self> {
        let capacity = capacity.max(1);
        let (ring, task_run) = build_ring(sq_entries(capacity))
            .map_err(|e| io::Error::new(e.kind(), format!("io_uring setup: {e}")))?;
        let bufs = BufRing::new(&ring, recv_buffers(capacity), HTTP_RECV_BUF_BYTES, task_run)
            .map_err(|e| io::Error::new(e.kind(), format!("io_uring buffer ring: {e}")))?;
        let slot_fds = register_files(&ring, capacity);
        Ok(UringOpen {
            ring,
            bufs,
            slots: Vec::with_capacity(capacity),
            capacity,
            target,
            target_sockaddr: Box::new(SockAddr::from(target)),
            slot_fds,
            graveyard: Vec::new(),
            cqes: VecDeque::with_capacity(1024),
            rearm: Vec::new(),
            reaped_at: Instant::now(),
            failed: None,
            scratch: http::scratch_buffer(),
        })
    }

    fn push(&mut self, sqe: squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every buffer and address an SQE points at (request bytes, target address,
            // buffer ring, file table entry) lives as long as this backend, which cancels
            // everything before freeing (Drop).
            if unsafe { self.ring.submission().push(&sqe) }.is_ok() {
                return Ok(());
            }
            match self.ring.submit() {
                Ok(_) => {}
                // The completion queue is full: take completions off it (they wait in `cqes`
                // for `next_event`) to make room.
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => self.reap(),
                Err(e) => return Err(io::Error::new(e.kind(), format!("io_uring_enter: {e}"))),
            }
        }
    }

    /// Put `fd` in slot i's entry of the registered file table, in submission order.
    fn set_slot(&mut self, i: usize, fd: RawFd) -> io::Result<()> {
        match files_update(&mut self.slot_fds, i, fd) {
            Some(sqe) => self.push(sqe),
            None => Ok(()),
        }
    }

    /// How SQEs name slot i's socket: its entry in the registered file table, or its descriptor
    /// without a table.
    fn file(&self, i: usize) -> File {
        match (&self.slot_fds, &self.slots[i].sock) {
            (Some(_), _) => File::Fixed(types::Fixed(i as u32)),
            (None, Some(sock)) => File::Fd(types::Fd(sock.as_raw_fd())),
            (None, None) => unreachable!("an operation on a closed slot"),
        }
    }

    fn arm_recv(&mut self, i: usize) -> io::Result<()> {
        let sqe = match self.file(i) {
            File::Fixed(f) => opcode::RecvMulti::new(f, BUF_GROUP).build(),
            File::Fd(fd) => opcode::RecvMulti::new(fd, BUF_GROUP).build(),
        };
        let s = &mut self.slots[i];
        s.recv_armed = true;
        let sqe = sqe.user_data(user_data(i, s.gen, OP_RECV));
        self.push(sqe)
    }

    /// Queue a send of `len` bytes at `buf` on slot i (open); `completes`: its success completes
    /// too (a staged send, see `stage`), else only a failure does.
    fn queue_send(&mut self, i: usize, buf: *const u8, len: usize, completes: bool) -> Outcome {
        let flags = libc::MSG_WAITALL | libc::MSG_NOSIGNAL;
        let sqe = match self.file(i) {
            File::Fixed(f) => opcode::Send::new(f, buf, len as u32).flags(flags).build(),
            File::Fd(fd) => opcode::Send::new(fd, buf, len as u32).flags(flags).build(),
        };
        let sqe = if completes {
            sqe
        } else {
            sqe.flags(squeue::Flags::SKIP_SUCCESS)
        }
        .user_data(user_data(i, self.slots[i].gen, OP_SEND));
        match self.push(sqe) {
            Ok(()) => Outcome::Ok,
            Err(e) => http::write_failed(&e),
        }
    }

    /// Send what slot i's stage holds, unless a send of it is in flight.
    fn send_staged(&mut self, i: usize) -> Outcome {
        match self.slots[i].stage.take() {
            Some(buf) => self.queue_send(i, buf.ptr, buf.len, true),
            None => Outcome::Ok,
        }
    }

    /// Move every available completion to `cqes`.
    fn reap(&mut self) {
        let before = self.cqes.len();
        self.cqes.extend(
            self.ring
                .completion()
                .map(|c| (c.user_data(), c.result(), c.flags())),
        );
        if self.cqes.len() > before {
            self.bufs.taken(with_buffers(self.cqes.range(before..)));
            self.reaped_at = Instant::now();
        }
    }

    /// The event a current completion means, or None for one the worker need not see.
    fn event(&mut self, i: usize, op: u64, res: i32, flags: u32) -> Option<IoEvent<RecvDone>> {
        match op {
            OP_CONNECT if res < 0 => match connect_failure(res, self.target) {
                Outcome::Fail(class, msg) => Some(IoEvent::Failed(class, msg)),
                _ => unreachable!("a failed connect is a failure"),
            },
            OP_CONNECT => {
                self.slots[i].connecting = false;
                if let Err(e) = self.arm_recv(i) {
                    self.failed.get_or_insert(e);
                }
                Some(IoEvent::Connected)
            }
            OP_RECV => {
                if !cqueue::more(flags) {
                    let s = &mut self.slots[i];
                    s.recv_armed = false;
                    self.rearm.push((i, s.gen));
                }
                Some(IoEvent::Readable(RecvDone {
                    bid: cqueue::buffer_select(flags),
                    res,
                }))
            }
            OP_SEND if res < 0 => match self.slots[i].w.write_error(&completion_error(res)) {
                Outcome::Fail(class, msg) => Some(IoEvent::Failed(class, msg)),
                _ => unreachable!("a failed send is a failure"),
            },
            // Only a staged send completes on success: the stage takes bytes again.
            OP_SEND => {
                self.slots[i].stage.sent();
                Some(IoEvent::Writable)
            }
            _ => None,
        }
    }
}

impl OpenIo for UringOpen {
    type Ready = RecvDone;

    fn add_slot(&mut self) {
        assert!(
            self.slots.len() < self.capacity,
            "slots beyond the ring's capacity"
        );
        self.slots.push(Slot {
            sock: None,
            gen: 0,
            connecting: false,
            recv_armed: false,
            w: WriteState::default(),
            stage: SendStage::default(),
        });
    }

    fn open(
        &mut self,
        i: usize,
        source: Option<SocketAddr>,
        nodelay: bool,
    ) -> Result<(), (ErrorClass, String)> {
        let target = self.target;
        let sock =
            new_socket(target, source, nodelay).map_err(|e| connect_failed(&e, target, source))?;
        let fd = sock.as_raw_fd();
        let queued = self.set_slot(i, fd).and_then(|()| {
            let s = &mut self.slots[i];
            s.sock = Some(sock);
            s.connecting = true;
            let (addr, len) = (self.target_sockaddr.as_ptr(), self.target_sockaddr.len());
            let sqe = match self.file(i) {
                File::Fixed(f) => opcode::Connect::new(f, addr, len).build(),
                File::Fd(fd) => opcode::Connect::new(fd, addr, len).build(),
            }
            .user_data(user_data(i, self.slots[i].gen, OP_CONNECT));
            self.push(sqe)
        });
        queued.map_err(|e| connect_failed(&e, target, source))
    }

    fn close(&mut self, i: usize) {
        let s = &mut self.slots[i];
        let Some(sock) = s.sock.take() else {
            return;
        };
        // Ends a connect, an armed recv or a blocked send still holding the socket in the kernel.
        let _ = sock.shutdown(std::net::Shutdown::Both);
        self.graveyard.push(sock);
        s.gen = s.gen.wrapping_add(1) & GEN_MASK;
        s.connecting = false;
        s.recv_armed = false;
        s.w.clear();
        s.stage.clear();
        // Empty the table's entry too: it holds its own reference to the socket, which would
        // otherwise stay open (no FIN to the server) until the slot is reused.
        if let Err(e) = self.set_slot(i, -1) {
            self.failed.get_or_insert(e);
        }
    }

    fn send(
        &mut self,
        i: usize,
        ex: &Exchange,
        c: &mut ExchangeConn,
        len: usize,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Outcome {
        if self.slots[i].sock.is_none() {
            return Outcome::Ok;
        }
        if http::needs_stage(ex, c) {
            self.slots[i].w.begin(len);
            return self.flush(i, ex, c, now, stats);
        }
        // The wire bytes stay put for the connection's whole life (see `Exchange::wire`), so the
        // SQE may point at them.
        stats.sent(now, len);
        self.queue_send(i, ex.wire(c).as_ptr(), len, false)
    }

    /// Plain HTTP/1.1's sends finish in the kernel (`MSG_WAITALL`): nothing is ever left to write.
    /// https and `--h2`: stage what the connection has to send and send it, unless a send is in
    /// flight (its completion, `IoEvent::Writable`, comes back here).
    fn flush(
        &mut self,
        i: usize,
        ex: &Exchange,
        c: &mut ExchangeConn,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Outcome {
        let s = &mut self.slots[i];
        if s.sock.is_none() || !http::needs_stage(ex, c) {
            return Outcome::Ok;
        }
        match http::flush(ex, c, &mut s.w, &mut s.stage, now, stats) {
            Outcome::Ok => self.send_staged(i),
            other => other,
        }
    }

    fn receive(
        &mut self,
        i: usize,
        r: RecvDone,
        ex: &mut Exchange,
        c: &mut ExchangeConn,
        stats: &mut ThreadStats,
    ) -> Outcome {
        let now = self.reaped_at;
        let arrived = match r.bid {
            // SAFETY: the kernel handed this buffer back in this completion; it is recycled
            // below, after its bytes were handled, and the slice is not used after that.
            Some(bid) => Arrived::Bytes(unsafe { self.bufs.data(bid, r.res.max(0) as usize) }),
            None if r.res == 0 => Arrived::Eof,
            None => {
                return recv_error(r.res).map_or(Outcome::Ok, |e| self.slots[i].w.read_error(&e))
            }
        };
        let staged = http::needs_stage(ex, c);
        // Sending waits for the schedule: an answered request only frees the connection.
        let out = match arrived {
            _ if staged => {
                let s = &mut self.slots[i];
                http::receive_staged(
                    ex,
                    c,
                    &mut s.w,
                    &mut s.stage,
                    arrived,
                    now,
                    &mut self.scratch,
                    stats,
                    http::send_frames_owed,
                )
            }
            Arrived::Bytes(data) => match ex.on_bytes(c, data, now, stats) {
                Received::Stop(out) => out,
                Received::Ok { .. } => Outcome::Ok,
            },
            Arrived::Eof => ex.on_eof(c, now, stats),
        };
        if let Some(bid) = r.bid {
            self.bufs.recycle(bid);
        }
        match out {
            Outcome::Ok if staged => self.send_staged(i),
            other => other,
        }
    }

    fn wait(&mut self, until: Option<Instant>) -> io::Result<bool> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        for (i, gen) in std::mem::take(&mut self.rearm) {
            let s = &self.slots[i];
            if s.gen == gen && s.sock.is_some() && !s.recv_armed {
                self.arm_recv(i)?;
            }
        }
        self.bufs.publish(&mut self.ring)?;
        let entered = match until {
            Some(at) => {
                let ts = Timespec::from(at.saturating_duration_since(Instant::now()));
                let args = SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(1, &args).map(|_| ())
            }
            None => {
                let queued = self.ring.submission().len() as u32;
                // SAFETY: no argument pointer; what is submitted is the queue's own entries.
                unsafe {
                    self.ring
                        .submitter()
                        .enter::<libc::sigset_t>(queued, 0, ENTER_GETEVENTS, None)
                }
                .map(|_| ())
            }
        };
        match entered {
            Ok(()) => {}
            // ETIME: the wake-up time came; EINTR: a signal; EBUSY: completions must be reaped
            // before more can be submitted.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) => {}
            Err(e) => return Err(io::Error::new(e.kind(), format!("io_uring_enter: {e}"))),
        }
        // Only once every queued SQE naming their descriptors has reached the kernel.
        if self.ring.submission().is_empty() {
            self.graveyard.clear();
        }
        self.reap();
        Ok(!self.cqes.is_empty())
    }

    fn next_event(&mut self) -> Option<(usize, IoEvent<RecvDone>)> {
        while let Some((ud, res, flags)) = self.cqes.pop_front() {
            let (i, gen, op) = decode(ud);
            if op == OP_FILES_UPDATE {
                self.failed.get_or_insert(files_update_error(res));
                continue;
            }
            let current = self
                .slots
                .get(i)
                .is_some_and(|s| s.gen == gen && s.sock.is_some());
            if !current {
                if let Some(bid) = cqueue::buffer_select(flags) {
                    self.bufs.recycle(bid);
                }
                continue;
            }
            if let Some(ev) = self.event(i, op, res, flags) {
                return Some((i, ev));
            }
        }
        None
    }
}

impl Drop for UringOpen {
    /// Shut every socket down and cancel what the kernel still does for this ring before its
    /// buffers are freed.
    fn drop(&mut self) {
        let sockets = self.slots.iter_mut().filter_map(|s| s.sock.take());
        shut_down_all(&mut self.ring, &mut self.bufs, sockets, &mut self.graveyard);
    }
}
