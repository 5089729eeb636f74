//! The HTTP/1.1 closed loop of one connection, without any I/O: what the bytes that arrived mean
//! (responses parsed, judged and counted, errors classified), and when the next batch of requests
//! goes out. Both engines drive it, the epoll one (`http`) and the io_uring one (`uring`), so
//! parsing, verification, accounting and error classes cannot drift apart between them; the engines
//! only move bytes.

use std::time::Instant;

use crate::engine::Outcome;
use crate::http::{Expectation, Response, ResponseParser, Step, Verdict};
use crate::stats::{ErrorClass, ThreadStats};

/// What the request and its answers must be; one per thread, built once from the config.
pub struct Exchange {
    /// `pipeline` copies of the request, concatenated; a batch of k is the first k copies.
    requests: Vec<u8>,
    one_request_len: usize,
    pipeline: usize,
    close: bool,
    head_request: bool,
    expect: Expectation,
    /// "GET /path", for error messages.
    what: String,
    /// Requests sent and not yet answered, over all of the thread's connections (for `--requests`).
    inflight_total: u64,
}

/// One connection's side of the exchange.
pub struct ExchangeConn {
    parser: ResponseParser,
    /// An incomplete response left over from the previous receive (empty almost always).
    carry: Vec<u8>,
    inflight: usize,
    sent_at: Instant,
}

/// What the engine does after `on_bytes`.
pub enum Received {
    /// Keep the connection; if `send_next`, the batch was fully answered: call `start_batch`.
    Ok { send_next: bool },
    /// Stop here: reconnect (`Connection: close`, `--close`) or fail with an error class.
    Stop(Outcome),
}

impl Exchange {
    pub fn new(
        request: &[u8],
        pipeline: usize,
        close: bool,
        method: &str,
        path: &str,
        expect: Expectation,
    ) -> Self {
        Exchange {
            requests: request.repeat(pipeline),
            one_request_len: request.len(),
            pipeline,
            close,
            head_request: method.eq_ignore_ascii_case("HEAD"),
            expect,
            what: format!("{method} {path}"),
            inflight_total: 0,
        }
    }

    /// `--close`: one request per connection.
    pub fn close_each(&self) -> bool {
        self.close
    }

    pub fn new_conn(&self) -> ExchangeConn {
        ExchangeConn {
            parser: ResponseParser::new(self.expect.wants_digest(), self.head_request),
            carry: Vec::new(),
            inflight: 0,
            sent_at: Instant::now(),
        }
    }

    /// The connection is gone: whatever it had in flight will never be answered.
    pub fn reset(&mut self, c: &mut ExchangeConn) {
        self.inflight_total = self.inflight_total.saturating_sub(c.inflight as u64);
        c.inflight = 0;
        c.carry.clear();
        c.parser.reset();
    }

    /// When the oldest unanswered request on this connection went out (for `--timeout`).
    pub fn busy_since(&self, c: &ExchangeConn) -> Option<Instant> {
        (c.inflight > 0).then_some(c.sent_at)
    }

    pub fn inflight(&self, c: &ExchangeConn) -> usize {
        c.inflight
    }

    pub fn inflight_total(&self) -> u64 {
        self.inflight_total
    }

    /// The requests of every batch: a batch of length `len` (from `start_batch`) is `wire()[..len]`.
    pub fn wire(&self) -> &[u8] {
        &self.requests
    }

    /// Begin the next batch on this connection: how many bytes of `wire()` to send, or None when
    /// `--requests` is used up (everything still owed is already in flight). Latency runs from `now`.
    pub fn start_batch(
        &mut self,
        c: &mut ExchangeConn,
        now: Instant,
        stats: &ThreadStats,
    ) -> Option<usize> {
        let k = match stats.response_quota {
            None => self.pipeline,
            Some(q) => {
                let left = q.saturating_sub(stats.responses + self.inflight_total);
                if left == 0 {
                    return None;
                }
                self.pipeline.min(left as usize)
            }
        };
        c.inflight = k;
        c.sent_at = now;
        self.inflight_total += k as u64;
        Some(k * self.one_request_len)
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
                            format!("response to {} without a request outstanding", self.what),
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
                        format!("{}: {e}", self.what),
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
                format!("{}: server closed the connection {partial}", self.what),
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
        self.inflight_total = self.inflight_total.saturating_sub(1);
        let verdict = self.expect.judge(&r);
        let ok = matches!(verdict, Verdict::Ok);
        if stats.response(now, now - c.sent_at, ok) {
            match verdict {
                Verdict::Ok => {}
                Verdict::Status => {
                    stats.status_error(r.status);
                    stats.error(now, ErrorClass::Status, || {
                        format!(
                            "status {} from {} (expected {})",
                            r.status,
                            self.what,
                            self.expect.describe_status()
                        )
                    });
                }
                Verdict::Mismatch(m) => stats.error(now, ErrorClass::VerificationMismatch, || {
                    format!("{}: {m}", self.what)
                }),
            }
        }
        if !r.keep_alive || self.close {
            return Some(Outcome::Reconnect);
        }
        None
    }
}
