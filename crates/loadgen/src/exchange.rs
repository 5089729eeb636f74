//! HTTP/1.1 on one connection, without any I/O: which request bytes go out, what the bytes that
//! arrived mean (responses parsed, judged and counted, errors classified), and when a batch is fully
//! answered. Every load model drives it: the closed loop on both engines (epoll in `http`, io_uring
//! in `uring`) and the open loop (`openloop`), so parsing, verification, accounting and error
//! classes cannot drift apart between them; the engines only move bytes, the load models only
//! decide when a request goes out.
//!
//! Latency runs from a request's intended send time: in the closed loop that is when it was sent;
//! in the open loop it is the schedule's time (corrected for coordinated omission), and the time
//! from the actual send is kept beside it (`Exchange::with_uncorrected`).
//!
//! With `--urls` each request of a batch is the next pick of the URL list (`urls::UrlPicker`, the
//! open loop's order and seed), and each response is judged by the expectation of the URL it
//! answers: HTTP/1.1 answers in order, so a connection keeps the URLs it has in flight, oldest first.
//!
//! With `--h2` a connection is an HTTP/2 connection (`http2::H2Conn`): a batch tops the connection
//! up to `--streams` streams in flight, each answer is matched to its stream, and the closed loop
//! replaces each answered stream at once (`Received::Ok { send_next: true }` after any answer or
//! frame to send); the open loop opens one stream per scheduled request (`start_one`) on a
//! connection with a free one (`can_start`). Responses are judged and counted by the same code as
//! HTTP/1.1's.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::HttpConfig;
use crate::http::{Response, ResponseParser, Step, Verdict};
use hdrhistogram::Histogram;

use crate::histogram::{micros, new_histogram};
use crate::http::urls::{Requests, UrlPicker};
use crate::http2::{self, H2Conn, H2Requests};
use crate::stats::{ErrorClass, ThreadStats};
use crate::tls::TlsSettings;

/// What the requests and their answers must be; one per thread, built once from the config.
pub struct Exchange {
    /// Every URL's request bytes and expectation (one entry without `--urls`).
    urls: Arc<Requests>,
    /// One URL: `pipeline` copies of its request, concatenated; a batch of k is the first k copies,
    /// sent straight from here with no copying. Several URLs: unused (batches are built per
    /// connection, see `ExchangeConn::batch`).
    repeated: Vec<u8>,
    one_request_len: usize,
    /// Several URLs: the largest batch, in bytes (`pipeline` times the longest request).
    batch_capacity: usize,
    picker: UrlPicker,
    pipeline: usize,
    close: bool,
    head_request: bool,
    /// Requests sent and not yet answered, over all of the thread's connections (for `--requests`).
    inflight_total: u64,
    /// The fastest response since `take_fastest_recent` last ran, and how many there were (warm-up
    /// included): what the io_uring engine's automatic coalescing window follows.
    fastest_recent: Duration,
    recent_count: u32,
    /// Responses completed on this thread, warm-up included, never reset (what `--coalesce-us
    /// auto`'s trial divides its CPU time by).
    completed: u64,
    /// Open loop: latency from the actual send (what a closed-loop tool would report), beside the
    /// corrected one in `ThreadStats`, and how many of its entries are lower bounds.
    uncorrected: Option<Uncorrected>,
    /// https: what the engine's TLS layer (`io::tls`) starts each connection's session with. The
    /// exchange itself only ever sees the plaintext; it carries this for the engine that holds it.
    tls: Option<TlsSettings>,
    /// `--h2`: every connection speaks HTTP/2 with these requests (None: HTTP/1.1).
    h2: Option<Arc<H2Requests>>,
}

/// The open loop's latencies from the actual send, for one phase.
pub struct Uncorrected {
    pub hist: Histogram<u64>,
    /// Entries that are lower bounds: requests still unanswered when the phase ended.
    pub censored: u64,
}

/// One connection's side of the exchange.
pub struct ExchangeConn {
    parser: ResponseParser,
    /// An incomplete response left over from the previous receive (empty almost always).
    carry: Vec<u8>,
    inflight: usize,
    /// When the current batch went out, and when it was meant to (the same in the closed loop).
    sent_at: Instant,
    intended: Instant,
    /// Responses completed since this connection's socket was opened (`--conn-rate`'s requests per
    /// connection).
    completed: u32,
    /// A response was counted on this connection slot during the measured phase (kept across
    /// reconnects: the slot is one of the `-c` connections, whatever socket it has now).
    answered: bool,
    /// Several URLs: the URL of every request in flight, oldest first.
    pending: VecDeque<usize>,
    /// Several URLs: the current batch's bytes. Allocated once at the largest batch's size and never
    /// grown, so its address stays put for the connection's whole life: the io_uring engine's send
    /// points at it until the kernel is done, which may be after a reconnect started the next batch.
    batch: Vec<u8>,
    /// The URL of the last request sent, for messages about an answer to nothing.
    last_url: usize,
    /// `--h2`: the connection's HTTP/2 state (its streams, the bytes it has to send).
    h2: Option<Box<H2Conn>>,
}

impl ExchangeConn {
    /// `--h2`: the connection's HTTP/2 state.
    pub fn h2_mut(&mut self) -> Option<&mut H2Conn> {
        self.h2.as_deref_mut()
    }

    pub fn h2(&self) -> Option<&H2Conn> {
        self.h2.as_deref()
    }
}

/// What a protocol handler tells the engine about a connection.
#[derive(Debug)]
pub enum Outcome {
    /// Keep going.
    Ok,
    /// The exchange ended normally but the connection cannot carry more (`--close`, or the server
    /// announced a close): open a new one at once.
    Reconnect,
    /// The connection did all it had to do (echo with `--bytes`): close it and do not replace it.
    Finished,
    /// Count an error of this class, close the connection, replace it after a backoff (or not,
    /// if the protocol says failed connections are not replaced).
    Fail(ErrorClass, String),
}

/// What the engine does after `on_bytes`.
pub enum Received {
    /// Keep the connection; if `send_next`, the batch was fully answered: call `start_batch`.
    Ok { send_next: bool },
    /// Stop here: reconnect (`Connection: close`, `--close`) or fail with an error class.
    Stop(Outcome),
}

impl Exchange {
    /// `seed` and `thread_index` place this thread in the URL order, as in the open loop.
    pub fn new(
        urls: Arc<Requests>,
        pipeline: usize,
        close: bool,
        head_request: bool,
        seed: u64,
        thread_index: usize,
    ) -> Self {
        let one = urls.wire.len() == 1;
        Exchange {
            repeated: if one {
                urls.wire[0].repeat(pipeline)
            } else {
                Vec::new()
            },
            one_request_len: urls.wire[0].len(),
            batch_capacity: if one { 0 } else { urls.longest() * pipeline },
            picker: UrlPicker::new(urls.wire.len(), urls.order, seed, thread_index),
            urls,
            pipeline,
            close,
            head_request,
            inflight_total: 0,
            fastest_recent: Duration::MAX,
            recent_count: 0,
            completed: 0,
            uncorrected: None,
            tls: None,
            h2: None,
        }
    }

    /// Keep the latency from the actual send too (the open loop), see `take_uncorrected`.
    pub fn with_uncorrected(mut self) -> Self {
        self.uncorrected = Some(Uncorrected {
            hist: new_histogram(),
            censored: 0,
        });
        self
    }

    /// The latencies from the actual send recorded since the last call (None without
    /// `with_uncorrected`); recording starts over.
    pub fn take_uncorrected(&mut self) -> Option<Uncorrected> {
        let u = self.uncorrected.as_mut()?;
        Some(std::mem::replace(
            u,
            Uncorrected {
                hist: new_histogram(),
                censored: 0,
            },
        ))
    }

    /// The fastest response latency seen since the last call, once at least `at_least` responses
    /// came in (then the count starts over); None before that.
    pub fn take_fastest_recent(&mut self, at_least: u32) -> Option<Duration> {
        if self.recent_count < at_least {
            return None;
        }
        let fastest = self.fastest_recent;
        self.fastest_recent = Duration::MAX;
        self.recent_count = 0;
        Some(fastest)
    }

    /// Responses completed on this thread so far, warm-up included.
    pub fn completed_total(&self) -> u64 {
        self.completed
    }

    /// The exchange a `netarena-load http` closed loop asks for, on load thread `thread_index`.
    pub fn for_config(h: &HttpConfig, thread_index: usize) -> Self {
        Exchange {
            tls: h.tls.clone(),
            h2: h.h2.clone(),
            ..Exchange::new(
                h.requests_wire.clone(),
                h.pipeline,
                h.close,
                h.method.eq_ignore_ascii_case("HEAD"),
                h.seed,
                thread_index,
            )
        }
    }

    /// https: the TLS settings of the run (None: plain HTTP).
    pub fn tls(&self) -> Option<&TlsSettings> {
        self.tls.as_ref()
    }

    fn several_urls(&self) -> bool {
        self.urls.wire.len() > 1
    }

    /// The URL the next response on `c` answers (or the last one sent, with nothing in flight).
    fn answering(&self, c: &ExchangeConn) -> usize {
        c.pending.front().copied().unwrap_or(c.last_url)
    }

    /// `--close`: one request per connection.
    pub fn close_each(&self) -> bool {
        self.close
    }

    fn new_h2(&self) -> Option<Box<H2Conn>> {
        self.h2.as_ref().map(|h| {
            Box::new(H2Conn::new(
                h.settings,
                self.urls.wants_digest(),
                self.head_request,
            ))
        })
    }

    pub fn new_conn(&self) -> ExchangeConn {
        ExchangeConn {
            parser: ResponseParser::new(self.urls.wants_digest(), self.head_request),
            carry: Vec::new(),
            inflight: 0,
            sent_at: Instant::now(),
            intended: Instant::now(),
            completed: 0,
            answered: false,
            pending: VecDeque::with_capacity(if self.several_urls() {
                self.pipeline
            } else {
                0
            }),
            batch: Vec::with_capacity(self.batch_capacity),
            last_url: 0,
            h2: self.new_h2(),
        }
    }

    /// The connection is gone: whatever it had in flight will never be answered.
    pub fn reset(&mut self, c: &mut ExchangeConn) {
        self.inflight_total = self.inflight_total.saturating_sub(c.inflight as u64);
        c.inflight = 0;
        c.completed = 0;
        c.pending.clear();
        c.carry.clear();
        c.parser.reset();
        if c.h2.is_some() {
            c.h2 = self.new_h2();
        }
    }

    /// When the oldest unanswered request on this connection went out (for `--timeout`).
    pub fn busy_since(&self, c: &ExchangeConn) -> Option<Instant> {
        if let Some(h2) = c.h2() {
            return h2.oldest_sent();
        }
        (c.inflight > 0).then_some(c.sent_at)
    }

    pub fn inflight(&self, c: &ExchangeConn) -> usize {
        c.inflight
    }

    /// The open loop: may one more request go out on this (open) connection now? HTTP/1.1: when
    /// nothing is in flight (one request at a time). `--h2`: when a stream is free (fewer than
    /// `--streams` and than the server's limit in flight, and the server is not going away).
    pub fn can_start(&self, c: &ExchangeConn) -> bool {
        match c.h2() {
            Some(h2) => h2.can_open(),
            None => c.inflight == 0,
        }
    }

    /// The open loop: the connection is up. With `--h2` its preface is queued at once (so the
    /// server's SETTINGS, its stream limit among them, arrive before the first scheduled request):
    /// true when there are bytes to write now.
    pub fn on_connected(&self, c: &mut ExchangeConn) -> bool {
        match c.h2_mut() {
            Some(h2) => {
                h2.greet();
                !h2.unsent().is_empty()
            }
            None => false,
        }
    }

    /// Responses completed on this connection since its socket opened.
    pub fn completed(&self, c: &ExchangeConn) -> u32 {
        c.completed
    }

    /// A new measured phase on the same connection (the open loop's rate steps): it has not been
    /// answered in it yet.
    pub fn new_phase(&self, c: &mut ExchangeConn) {
        c.answered = false;
    }

    /// The measured phase ended at `end` with this connection open (or `connecting`): what it still
    /// has in flight is unfinished (censored into the histogram), and if it got no answer in the
    /// whole phase it is one of the connections the server left waiting.
    pub fn end_of_phase(
        &self,
        c: &ExchangeConn,
        connecting: bool,
        end: Instant,
        stats: &mut ThreadStats,
    ) {
        if let Some(h2) = c.h2() {
            // Each stream from its own send; the connection counted once as left unanswered.
            let mut first = true;
            for intended in h2.intended_times() {
                if first {
                    stats.left_in_flight(intended, 1, c.answered, end);
                    first = false;
                } else {
                    stats.unfinished(intended, 1, end);
                }
            }
            if first && connecting {
                stats.left_in_flight(c.intended, 0, c.answered, end);
            }
            return;
        }
        if connecting || c.inflight > 0 {
            stats.left_in_flight(c.intended, c.inflight as u64, c.answered, end);
        }
    }

    /// The open loop's phase ended at `end` with this connection's request unanswered: besides
    /// `end_of_phase`, its wait since the actual send is a lower bound of its uncorrected latency
    /// (with `--h2`, each stream's since its own send).
    pub fn censor_uncorrected(&mut self, c: &ExchangeConn, end: Instant) {
        let Some(u) = self.uncorrected.as_mut() else {
            return;
        };
        if let Some(h2) = c.h2() {
            for sent_at in h2.sent_times().filter(|&t| t < end) {
                u.hist.saturating_record(micros(end - sent_at));
                u.censored += 1;
            }
            return;
        }
        if c.inflight > 0 && c.sent_at < end {
            u.hist
                .saturating_record_n(micros(end - c.sent_at), c.inflight as u64);
            u.censored += c.inflight as u64;
        }
    }

    pub fn inflight_total(&self) -> u64 {
        self.inflight_total
    }

    /// The requests of `c`'s current batch: a batch of length `len` (from `start_batch`) is
    /// `wire(c)[..len]`. The bytes stay at the same address for the whole run (see `batch`).
    pub fn wire<'a>(&'a self, c: &'a ExchangeConn) -> &'a [u8] {
        if self.several_urls() {
            &c.batch
        } else {
            &self.repeated
        }
    }

    /// Begin the next batch on this connection: how many bytes of `wire()` to send, or None when
    /// `--requests` is used up (everything still owed is already in flight). Latency runs from `now`.
    pub fn start_batch(
        &mut self,
        c: &mut ExchangeConn,
        now: Instant,
        stats: &ThreadStats,
    ) -> Option<usize> {
        if c.h2.is_some() {
            // The closed loop keeps every stream it may have busy.
            return self.start_streams(c, usize::MAX, now, now, stats);
        }
        self.start(c, self.pipeline, now, now, stats)
    }

    /// The open loop: begin one request meant to go out at `intended`, sent at `now`; its length in
    /// bytes of `wire()`. With `--h2` it is one new stream (`can_start` must be true), and the bytes
    /// are the connection's outbox.
    pub fn start_one(
        &mut self,
        c: &mut ExchangeConn,
        intended: Instant,
        now: Instant,
        stats: &ThreadStats,
    ) -> Option<usize> {
        self.start(c, 1, intended, now, stats)
    }

    fn start(
        &mut self,
        c: &mut ExchangeConn,
        most: usize,
        intended: Instant,
        now: Instant,
        stats: &ThreadStats,
    ) -> Option<usize> {
        if c.h2.is_some() {
            return self.start_streams(c, most, intended, now, stats);
        }
        let k = match stats.response_quota {
            None => most,
            Some(q) => {
                let left = q.saturating_sub(stats.responses + self.inflight_total);
                if left == 0 {
                    return None;
                }
                most.min(left as usize)
            }
        };
        c.inflight = k;
        c.sent_at = now;
        c.intended = intended;
        self.inflight_total += k as u64;
        if !self.several_urls() {
            return Some(k * self.one_request_len);
        }
        c.batch.clear();
        for _ in 0..k {
            let u = self.picker.pick();
            c.batch.extend_from_slice(&self.urls.wire[u]);
            c.pending.push_back(u);
            c.last_url = u;
        }
        debug_assert!(
            c.batch.capacity() == self.batch_capacity,
            "the batch buffer must never move"
        );
        Some(c.batch.len())
    }

    /// `--h2`: open at most `most` streams (meant for `intended`, sent at `now`), stopping when
    /// `--streams` are in flight (fewer if the server allows fewer, none once it is going away or
    /// `--requests` is used up). Some(bytes to send) when the connection has any (new requests, or
    /// frames its receipts asked for), None otherwise.
    fn start_streams(
        &mut self,
        c: &mut ExchangeConn,
        most: usize,
        intended: Instant,
        now: Instant,
        stats: &ThreadStats,
    ) -> Option<usize> {
        let h = self.h2.as_ref().expect("an HTTP/2 exchange");
        let h2 = c.h2.as_mut().expect("an HTTP/2 connection");
        let mut opened = 0;
        while opened < most && h2.can_open() {
            if let Some(q) = stats.response_quota {
                if q.saturating_sub(stats.responses + self.inflight_total) == 0 {
                    break;
                }
            }
            let u = self.picker.pick();
            h2.start_stream(u, &h.blocks[u], &h.body, intended, now);
            opened += 1;
            c.last_url = u;
            c.inflight += 1;
            self.inflight_total += 1;
            c.sent_at = now;
            c.intended = intended;
        }
        let pending = h2.unsent().len();
        (pending > 0).then_some(pending)
    }

    /// `--h2`: bytes of the connection's HTTP/2 stream: every frame in them handled, every complete
    /// response judged and counted as over HTTP/1.1.
    fn on_h2_bytes(
        &mut self,
        c: &mut ExchangeConn,
        data: &[u8],
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Received {
        let h2 = c.h2.as_mut().expect("an HTTP/2 connection");
        if let Err(e) = h2.receive(data) {
            return Received::Stop(Outcome::Fail(
                ErrorClass::H2Protocol,
                format!("HTTP/2: {e}"),
            ));
        }
        let mut events = std::mem::take(&mut h2.events);
        let mut answered = false;
        for event in events.drain(..) {
            match event {
                http2::Event::Done {
                    url,
                    sent_at,
                    intended,
                    response,
                } => {
                    c.inflight = c.inflight.saturating_sub(1);
                    c.completed = c.completed.saturating_add(1);
                    self.inflight_total = self.inflight_total.saturating_sub(1);
                    self.count_response(c, url, &response, sent_at, intended, now, stats);
                    answered = true;
                }
                http2::Event::Reset { url, code } => {
                    c.inflight = c.inflight.saturating_sub(1);
                    self.inflight_total = self.inflight_total.saturating_sub(1);
                    stats.error(now, ErrorClass::H2StreamReset, || {
                        format!(
                            "{}: the server reset the stream (RST_STREAM {})",
                            self.urls.what[url],
                            http2::frame::error_name(code)
                        )
                    });
                    answered = true;
                }
                http2::Event::GoAway {
                    code,
                    last_stream,
                    unprocessed,
                    debug,
                } => {
                    // Streams the server did not process were never answered: they leave the
                    // count of requests in flight, as a client would retry them elsewhere.
                    c.inflight = c.inflight.saturating_sub(unprocessed);
                    self.inflight_total = self.inflight_total.saturating_sub(unprocessed as u64);
                    stats.h2_goaway(now);
                    if code != http2::frame::NO_ERROR {
                        stats.error(now, ErrorClass::H2Goaway, || {
                            format!(
                                "the server went away (GOAWAY {}, last stream {last_stream}{})",
                                http2::frame::error_name(code),
                                if debug.is_empty() {
                                    String::new()
                                } else {
                                    format!(": {debug}")
                                }
                            )
                        });
                    }
                }
            }
        }
        let h2 = c.h2.as_mut().expect("an HTTP/2 connection");
        h2.events = events;
        if h2.closing() && h2.in_flight() == 0 {
            // Nothing more can start here: a new connection carries on (a graceful GOAWAY, as
            // servers send after so many requests, is a reconnect like HTTP/1.1's close).
            return Received::Stop(Outcome::Reconnect);
        }
        Received::Ok {
            send_next: answered || !h2.unsent().is_empty(),
        }
    }

    /// Bytes arrived on the connection at `now`: parse, judge and count every complete response in
    /// them; an incomplete one is carried to the next call.
    pub fn on_bytes(
        &mut self,
        c: &mut ExchangeConn,
        data: &[u8],
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Received {
        stats.received(now, data.len());
        if c.h2.is_some() {
            return self.on_h2_bytes(c, data, now, stats);
        }
        let mut carry = std::mem::take(&mut c.carry);
        let from_carry = !carry.is_empty();
        if from_carry {
            carry.extend_from_slice(data);
        }
        let buf: &[u8] = if from_carry { &carry } else { data };
        let mut pos = 0;
        let mut stop = None;
        while pos < buf.len() {
            match c.parser.advance(&buf[pos..]) {
                Step::NeedMore(k) => {
                    pos += k;
                    break;
                }
                Step::Done(k, r) => {
                    pos += k;
                    if c.inflight == 0 {
                        stop = Some(Outcome::Fail(
                            ErrorClass::ParseError,
                            format!(
                                "response to {} without a request outstanding",
                                self.urls.what[c.last_url]
                            ),
                        ));
                        break;
                    }
                    if let Some(out) = self.on_response(c, r, now, stats) {
                        stop = Some(out);
                        break;
                    }
                }
                Step::Error(e) => {
                    stop = Some(Outcome::Fail(
                        ErrorClass::ParseError,
                        format!("{}: {e}", self.urls.what[self.answering(c)]),
                    ));
                    break;
                }
            }
        }
        // After a stop nothing is kept: the connection is closed or replaced.
        let keep_from = if stop.is_some() { buf.len() } else { pos };
        if from_carry {
            carry.drain(..keep_from);
        } else {
            carry.extend_from_slice(&data[keep_from..]);
        }
        c.carry = carry;
        match stop {
            Some(out) => Received::Stop(out),
            None => Received::Ok {
                send_next: c.inflight == 0,
            },
        }
    }

    /// The server closed the connection (read returned 0).
    pub fn on_eof(
        &mut self,
        c: &mut ExchangeConn,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Outcome {
        if let Some(h2) = c.h2() {
            return if h2.in_flight() > 0 {
                Outcome::Fail(
                    ErrorClass::ClosedEarly,
                    format!(
                        "the server closed the HTTP/2 connection with {} stream(s) in flight",
                        h2.in_flight()
                    ),
                )
            } else {
                Outcome::Reconnect
            };
        }
        let carried = !c.carry.is_empty();
        if !carried && c.inflight > 0 {
            if let Some(r) = c.parser.on_eof() {
                // A close-delimited body ends here; keep_alive is false, so this reconnects.
                return self
                    .on_response(c, r, now, stats)
                    .unwrap_or(Outcome::Reconnect);
            }
        }
        if c.inflight > 0 {
            let partial = if c.parser.in_body() || carried {
                "in the middle of a response"
            } else {
                "before the response"
            };
            return Outcome::Fail(
                ErrorClass::ClosedEarly,
                format!(
                    "{}: server closed the connection {partial}",
                    self.urls.what[self.answering(c)]
                ),
            );
        }
        Outcome::Reconnect
    }

    /// Account for one complete response; Some(outcome) if the connection must stop here.
    fn on_response(
        &mut self,
        c: &mut ExchangeConn,
        r: Response,
        now: Instant,
        stats: &mut ThreadStats,
    ) -> Option<Outcome> {
        c.inflight = c.inflight.saturating_sub(1);
        c.completed = c.completed.saturating_add(1);
        self.inflight_total = self.inflight_total.saturating_sub(1);
        let u = c.pending.pop_front().unwrap_or(0);
        let (sent_at, intended) = (c.sent_at, c.intended);
        self.count_response(c, u, &r, sent_at, intended, now, stats);
        if !r.keep_alive || self.close {
            return Some(Outcome::Reconnect);
        }
        None
    }

    /// Judge one complete response to URL `u` (sent at `sent_at`, meant for `intended`) and count
    /// it: the one definition of what a response means, for HTTP/1.1 and HTTP/2 alike.
    #[allow(clippy::too_many_arguments)]
    fn count_response(
        &mut self,
        c: &mut ExchangeConn,
        u: usize,
        r: &Response,
        sent_at: Instant,
        intended: Instant,
        now: Instant,
        stats: &mut ThreadStats,
    ) {
        let expect = &self.urls.expect[u];
        let what = &self.urls.what[u];
        let verdict = expect.judge(r);
        let ok = matches!(verdict, Verdict::Ok);
        let from_send = now.saturating_duration_since(sent_at);
        self.fastest_recent = self.fastest_recent.min(from_send);
        self.recent_count = self.recent_count.saturating_add(1);
        self.completed += 1;
        if stats.response(now, now.saturating_duration_since(intended), ok) {
            c.answered = true;
            match verdict {
                Verdict::Ok => {
                    if let Some(u) = self.uncorrected.as_mut() {
                        u.hist.saturating_record(micros(from_send));
                    }
                }
                Verdict::Status => {
                    stats.status_error(r.status);
                    stats.error(now, ErrorClass::Status, || {
                        format!(
                            "status {} from {what} (expected {})",
                            r.status,
                            expect.describe_status()
                        )
                    });
                }
                Verdict::Mismatch(m) => stats.error(now, ErrorClass::VerificationMismatch, || {
                    format!("{what}: {m}")
                }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::http::urls::UrlOrder;
    use crate::http::Expectation;

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";

    fn one_url(pipeline: usize) -> Exchange {
        let urls = Requests::one(
            b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            "GET /".into(),
            "/".into(),
            Expectation::default(),
            UrlOrder::Random,
        );
        Exchange::new(Arc::new(urls), pipeline, false, false, 1, 0)
    }

    fn setup() -> (Exchange, ExchangeConn, ThreadStats) {
        let ex = one_url(1);
        let c = ex.new_conn();
        let now = Instant::now();
        (
            ex,
            c,
            ThreadStats::new(now, now + Duration::from_secs(60), None),
        )
    }

    #[test]
    fn a_response_split_anywhere_is_one_response_then_the_next_batch() {
        for cut in 1..OK.len() {
            let (mut ex, mut c, mut stats) = setup();
            assert_eq!(ex.start_batch(&mut c, Instant::now(), &stats), Some(18));
            let first = ex.on_bytes(&mut c, &OK[..cut], Instant::now(), &mut stats);
            assert!(
                matches!(first, Received::Ok { send_next: false }),
                "cut {cut}"
            );
            let second = ex.on_bytes(&mut c, &OK[cut..], Instant::now(), &mut stats);
            assert!(
                matches!(second, Received::Ok { send_next: true }),
                "cut {cut}"
            );
            assert_eq!((stats.responses, stats.requests), (1, 1), "cut {cut}");
            assert_eq!(ex.inflight_total(), 0);
        }
    }

    #[test]
    fn an_answer_to_nothing_is_a_parse_error_not_a_success() {
        let (mut ex, mut c, mut stats) = setup();
        ex.start_batch(&mut c, Instant::now(), &stats);
        let two = [OK, OK].concat();
        match ex.on_bytes(&mut c, &two, Instant::now(), &mut stats) {
            Received::Stop(Outcome::Fail(ErrorClass::ParseError, msg)) => {
                assert!(msg.contains("without a request outstanding"), "{msg}")
            }
            _ => panic!("two responses to one request must fail"),
        }
        assert_eq!(stats.requests, 1);
    }

    #[test]
    fn requests_quota_counts_what_is_in_flight() {
        let now = Instant::now();
        let mut ex = one_url(4);
        let stats = ThreadStats::new(now, now + Duration::from_secs(60), Some(6));
        let (mut a, mut b) = (ex.new_conn(), ex.new_conn());
        assert_eq!(ex.start_batch(&mut a, now, &stats), Some(4 * 18));
        assert_eq!(ex.start_batch(&mut b, now, &stats), Some(2 * 18));
        assert_eq!(ex.start_batch(&mut b, now, &stats), None);
        ex.reset(&mut a);
        assert_eq!(ex.inflight_total(), 2);
    }

    #[test]
    fn the_fastest_recent_latency_needs_enough_responses_then_starts_over() {
        let (mut ex, mut c, mut stats) = setup();
        assert_eq!(ex.take_fastest_recent(1), None);
        let sent = Instant::now();
        ex.start_batch(&mut c, sent, &stats);
        ex.on_bytes(&mut c, OK, sent + Duration::from_micros(300), &mut stats);
        assert_eq!(ex.take_fastest_recent(2), None);
        assert_eq!(ex.take_fastest_recent(1), Some(Duration::from_micros(300)));
        assert_eq!(ex.take_fastest_recent(1), None);
    }

    #[test]
    fn the_open_loop_starts_one_h2_stream_per_request_until_the_streams_are_full() {
        let mut ex = one_url(1);
        ex.h2 = Some(Arc::new(H2Requests {
            settings: http2::H2Settings {
                streams: 2,
                window: 65_535,
            },
            blocks: vec![vec![0x82]],
            body: Vec::new(),
        }));
        let mut c = ex.new_conn();
        let now = Instant::now();
        let stats = ThreadStats::new(now, now + Duration::from_secs(60), None);
        // Connected: the preface goes out before any request.
        assert!(ex.on_connected(&mut c));
        let preface = c.h2().unwrap().unsent().len();
        c.h2_mut().unwrap().wrote(preface);
        // One request is one stream, meant for its intended time, whatever the room left.
        let intended = now - Duration::from_millis(5);
        assert!(ex.can_start(&c));
        let len = ex.start_one(&mut c, intended, now, &stats).unwrap();
        assert_eq!(len, 9 + 1, "one HEADERS frame and nothing else");
        assert_eq!(ex.inflight(&c), 1);
        let times: Vec<Instant> = c.h2().unwrap().intended_times().collect();
        assert_eq!(times, vec![intended]);
        assert_eq!(ex.busy_since(&c), Some(now));
        // The second fills the connection's --streams.
        assert!(ex.can_start(&c));
        ex.start_one(&mut c, now, now, &stats).unwrap();
        assert!(!ex.can_start(&c));
        assert_eq!((ex.inflight(&c), ex.inflight_total()), (2, 2));
    }

    #[test]
    fn each_response_of_a_pipelined_batch_is_judged_by_its_own_url() {
        // Round-robin over /a (2-byte body) and /b (3-byte body): the batch is a then b, and the
        // same 2-byte answer to both is right for /a and a mismatch for /b.
        let urls = Requests {
            wire: vec![b"GET /a\r\n\r\n".to_vec(), b"GET /bb\r\n\r\n".to_vec()],
            what: vec!["GET /a".into(), "GET /bb".into()],
            paths: vec!["/a".into(), "/bb".into()],
            expect: vec![
                Expectation {
                    body_size: Some(2),
                    ..Default::default()
                },
                Expectation {
                    body_size: Some(3),
                    ..Default::default()
                },
            ],
            order: UrlOrder::RoundRobin,
        };
        let mut ex = Exchange::new(Arc::new(urls), 2, false, false, 1, 0);
        let mut c = ex.new_conn();
        let now = Instant::now();
        let mut stats = ThreadStats::new(now, now + Duration::from_secs(60), None);
        let len = ex.start_batch(&mut c, now, &stats).unwrap();
        assert_eq!(&ex.wire(&c)[..len], b"GET /a\r\n\r\nGET /bb\r\n\r\n");
        let at = ex.wire(&c).as_ptr();
        let two = [OK, OK].concat();
        assert!(matches!(
            ex.on_bytes(&mut c, &two, now, &mut stats),
            Received::Ok { send_next: true }
        ));
        assert_eq!((stats.responses, stats.errors_total()), (2, 1));
        // The next batch starts over at /a in the same buffer (the io_uring send points at it).
        ex.start_batch(&mut c, now, &stats);
        assert_eq!(ex.wire(&c).as_ptr(), at);
    }
}
