//! A scripted HTTP/2 server in cleartext (h2c, prior knowledge) for the cases a real server will
//! not produce on demand: a wrong body on some streams, RST_STREAM, GOAWAY with an error code, a
//! frame that breaks the protocol. Each connection: the client's preface is checked, an empty
//! SETTINGS sent (and the client's acknowledged), and every request (a HEADERS frame with
//! END_STREAM) answered with `:status 200` (one HPACK byte, static index 8) and `body` in one DATA
//! frame, unless the fault says otherwise for that request. Real HTTP/2 servers (nginx) are the
//! tests' main partners; this one only misbehaves where told, or answers late when told
//! (`AnswerAfter`, which also records how many streams a connection had in flight at once).

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::servers::{is_poll_timeout, loopback_listener, ConnCtx, TestServer, POLL_INTERVAL};

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

#[derive(Clone, Copy, Debug)]
pub enum H2Fault {
    None,
    /// Every Nth request of a connection gets a body one byte shorter.
    WrongBodyEvery(u64),
    /// Every Nth request of a connection is answered with RST_STREAM (INTERNAL_ERROR).
    ResetEvery(u64),
    /// After N requests on a connection: GOAWAY (ENHANCE_YOUR_CALM) naming the last stream answered,
    /// then the connection is closed once the client closes it.
    GoawayAfter(u64),
    /// After N requests on a connection: a DATA frame on stream 0, which no server may send.
    ProtocolErrorAfter(u64),
    /// Every request is answered (correctly) this long after it arrived, not at once: a slow
    /// server, with the streams of a connection in flight side by side (`Stats::peak_streams`).
    AnswerAfter(Duration),
}

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len();
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

pub fn h2c_server(body: &'static [u8], fault: H2Fault) -> TestServer {
    TestServer::start(loopback_listener(), None, move |stream, _, ctx| {
        serve(stream, body, fault, ctx);
    })
}

fn serve(mut stream: TcpStream, body: &[u8], fault: H2Fault, ctx: &ConnCtx) {
    let mut input: Vec<u8> = Vec::new();
    let mut buf = [0u8; 16384];
    let mut preface_seen = false;
    let mut answered = 0u64;
    let mut out = Vec::new();
    frame(&mut out, 0x4, 0, 0, &[]);
    if stream.write_all(&out).is_err() {
        return;
    }
    // AnswerAfter: the streams waiting for their answer, with when it is due, oldest first.
    let mut held: VecDeque<(Instant, u32)> = VecDeque::new();
    while !ctx.should_stop() {
        if let H2Fault::AnswerAfter(_) = fault {
            // Wake for the next answer due, not only every poll interval.
            let wait = held.front().map_or(POLL_INTERVAL, |&(due, _)| {
                due.saturating_duration_since(Instant::now())
                    .clamp(Duration::from_millis(1), POLL_INTERVAL)
            });
            let _ = stream.set_read_timeout(Some(wait));
            let mut out = Vec::new();
            while held.front().is_some_and(|&(due, _)| due <= Instant::now()) {
                let (_, id) = held.pop_front().expect("checked");
                frame(&mut out, 0x1, 0x4, id, &[0x88]);
                frame(&mut out, 0x0, 0x1, id, body);
                ctx.stats.good.fetch_add(1, Ordering::SeqCst);
            }
            if !out.is_empty() && stream.write_all(&out).is_err() {
                return;
            }
        }
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => input.extend_from_slice(&buf[..n]),
            Err(e) if is_poll_timeout(&e) => continue,
            Err(_) => return,
        }
        if !preface_seen {
            if input.len() < PREFACE.len() {
                continue;
            }
            assert_eq!(&input[..PREFACE.len()], PREFACE, "the client's preface");
            input.drain(..PREFACE.len());
            preface_seen = true;
        }
        let mut out = Vec::new();
        let mut at = 0;
        while input.len() - at >= 9 {
            let len = (usize::from(input[at]) << 16)
                | (usize::from(input[at + 1]) << 8)
                | usize::from(input[at + 2]);
            if input.len() - at < 9 + len {
                break;
            }
            let (kind, flags) = (input[at + 3], input[at + 4]);
            let id =
                u32::from_be_bytes([input[at + 5], input[at + 6], input[at + 7], input[at + 8]])
                    & 0x7fff_ffff;
            at += 9 + len;
            match kind {
                0x4 if flags & 0x1 == 0 => frame(&mut out, 0x4, 0x1, 0, &[]),
                0x1 if flags & 0x1 != 0 => {
                    ctx.stats.requests.fetch_add(1, Ordering::SeqCst);
                    answered += 1;
                    match fault {
                        H2Fault::GoawayAfter(n) if answered > n => {
                            let mut p = (id - 2).to_be_bytes().to_vec();
                            p.extend_from_slice(&0xbu32.to_be_bytes());
                            p.extend_from_slice(b"calm down");
                            frame(&mut out, 0x7, 0, 0, &p);
                            ctx.stats.misbehaved.fetch_add(1, Ordering::SeqCst);
                            let _ = stream.write_all(&out);
                            ctx.hold_until_peer_closes(&mut stream);
                            return;
                        }
                        H2Fault::ProtocolErrorAfter(n) if answered > n => {
                            frame(&mut out, 0x0, 0, 0, b"x");
                            ctx.stats.misbehaved.fetch_add(1, Ordering::SeqCst);
                            let _ = stream.write_all(&out);
                            ctx.hold_until_peer_closes(&mut stream);
                            return;
                        }
                        H2Fault::ResetEvery(n) if answered.is_multiple_of(n) => {
                            frame(&mut out, 0x3, 0, id, &2u32.to_be_bytes());
                            ctx.stats.misbehaved.fetch_add(1, Ordering::SeqCst);
                        }
                        H2Fault::AnswerAfter(delay) => {
                            held.push_back((Instant::now() + delay, id));
                            ctx.stats
                                .peak_streams
                                .fetch_max(held.len() as u64, Ordering::SeqCst);
                        }
                        H2Fault::WrongBodyEvery(n) if answered.is_multiple_of(n) => {
                            frame(&mut out, 0x1, 0x4, id, &[0x88]);
                            frame(&mut out, 0x0, 0x1, id, &body[..body.len() - 1]);
                            ctx.stats.misbehaved.fetch_add(1, Ordering::SeqCst);
                        }
                        _ => {
                            frame(&mut out, 0x1, 0x4, id, &[0x88]);
                            frame(&mut out, 0x0, 0x1, id, body);
                            ctx.stats.good.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                }
                _ => {}
            }
        }
        input.drain(..at);
        if !out.is_empty() && stream.write_all(&out).is_err() {
            return;
        }
    }
}
