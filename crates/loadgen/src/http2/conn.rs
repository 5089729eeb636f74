//! One HTTP/2 connection's client side, without I/O: the bytes to send (the preface, requests,
//! acknowledgements, window updates) gathered in an outbox the engine drains, and the bytes received
//! turned into events per stream (a complete response, a reset, the server going away). Which
//! request goes out when, and what a response means for the run, is `exchange`'s business.
//!
//! Flow control: the client announces `window` as every stream's initial window and raises the
//! connection's to the same, then gives back what it consumed once half a window is used, so a
//! server is held back only as far as `--h2-window` says. Requests are one HEADERS frame (and one
//! DATA frame for a body, at most `MAX_REQUEST_BODY` bytes, within every window a server starts
//! with), so the client's own sending never waits on the server's windows.

use std::collections::HashMap;
use std::time::Instant;

use sha2::{Digest, Sha256};

use super::frame::{self, Header};
use super::hpack::ResponseDecoder;
use crate::http::Response;

/// The largest request body sent over HTTP/2: one DATA frame of the default maximum size, which also
/// fits the initial window every server starts a stream with.
pub const MAX_REQUEST_BODY: usize = frame::DEFAULT_MAX_FRAME;
/// The dynamic table size the client's decoder allows (SETTINGS_HEADER_TABLE_SIZE's default; the
/// client never announces another).
const HEADER_TABLE_SIZE: usize = 4096;
/// A header block (HEADERS and its CONTINUATION frames) longer than this is refused: a server
/// sending one is broken, and the client must not buffer without bound.
const MAX_HEADER_BLOCK: usize = 256 * 1024;

/// How the client runs its HTTP/2 connections.
#[derive(Clone, Copy, Debug)]
pub struct H2Settings {
    /// Streams in flight per connection (`--streams`), fewer when the server allows fewer.
    pub streams: u32,
    /// Every stream's and the connection's receive window (`--h2-window`).
    pub window: u32,
}

/// A stream in flight.
struct Stream {
    url: usize,
    sent_at: Instant,
    intended: Instant,
    /// The final status, 0 until a final (non-1xx) HEADERS arrives.
    status: u16,
    body_len: u64,
    hasher: Option<Sha256>,
    /// Received and not yet given back to the stream's window.
    unacked: u32,
}

/// What the received bytes meant, stream by stream.
#[derive(Debug)]
pub enum Event {
    /// A response is complete (END_STREAM).
    Done {
        url: usize,
        sent_at: Instant,
        intended: Instant,
        response: Response,
    },
    /// The server reset the stream (RST_STREAM) before the response was complete.
    Reset { url: usize, code: u32 },
    /// The server is going away (GOAWAY): no new stream may start on this connection; streams
    /// above `last_stream` were not processed and were dropped (`unprocessed` of them).
    GoAway {
        code: u32,
        last_stream: u32,
        unprocessed: usize,
        debug: String,
    },
}

/// The header block being received: its HEADERS frame said no END_HEADERS yet.
struct PendingBlock {
    stream: u32,
    end_stream: bool,
    block: Vec<u8>,
}

pub struct H2Conn {
    settings: H2Settings,
    want_digest: bool,
    head_request: bool,
    out: Vec<u8>,
    /// Of `out`, the bytes the engine has written.
    written: usize,
    /// An incomplete frame carried over to the next receive.
    carry: Vec<u8>,
    decoder: ResponseDecoder,
    streams: HashMap<u32, Stream>,
    next_id: u32,
    started: bool,
    /// SETTINGS_MAX_CONCURRENT_STREAMS as the server announced it (unlimited until then).
    peer_max_streams: u32,
    going_away: bool,
    /// Received on the connection and not yet given back to its window.
    conn_unacked: u32,
    pending: Option<PendingBlock>,
    pub events: Vec<Event>,
}

impl H2Conn {
    pub fn new(settings: H2Settings, want_digest: bool, head_request: bool) -> H2Conn {
        H2Conn {
            settings,
            want_digest,
            head_request,
            out: Vec::with_capacity(4096),
            written: 0,
            carry: Vec::new(),
            decoder: ResponseDecoder::new(HEADER_TABLE_SIZE),
            streams: HashMap::with_capacity(settings.streams as usize),
            next_id: 1,
            started: false,
            peer_max_streams: u32::MAX,
            going_away: false,
            conn_unacked: 0,
            pending: None,
            events: Vec::new(),
        }
    }

    /// The bytes still to write.
    pub fn unsent(&self) -> &[u8] {
        &self.out[self.written..]
    }

    /// The engine wrote `n` bytes of `unsent()`.
    pub fn wrote(&mut self, n: usize) {
        self.written += n;
        if self.written >= self.out.len() {
            self.out.clear();
            self.written = 0;
        }
    }

    pub fn in_flight(&self) -> usize {
        self.streams.len()
    }

    /// May one more stream start now?
    pub fn can_open(&self) -> bool {
        !self.going_away
            && (self.streams.len() as u32) < self.settings.streams.min(self.peer_max_streams)
            && self.next_id <= frame::MAX_STREAM_ID
    }

    /// The server said GOAWAY, or the stream ids ran out: this connection takes no new stream.
    pub fn closing(&self) -> bool {
        self.going_away || self.next_id > frame::MAX_STREAM_ID
    }

    /// When the longest-waiting stream in flight was sent.
    pub fn oldest_sent(&self) -> Option<Instant> {
        self.streams.values().map(|s| s.sent_at).min()
    }

    /// When each stream in flight was meant to go out.
    pub fn intended_times(&self) -> impl Iterator<Item = Instant> + '_ {
        self.streams.values().map(|s| s.intended)
    }

    /// When each stream in flight actually went out.
    pub fn sent_times(&self) -> impl Iterator<Item = Instant> + '_ {
        self.streams.values().map(|s| s.sent_at)
    }

    /// Queue the connection's preface (the client's SETTINGS, and the connection window's raise)
    /// if it is not queued yet. The first stream does it itself; the open loop does it as soon as
    /// the connection is up, so the server's SETTINGS (its stream limit) arrive before its first
    /// scheduled request.
    pub fn greet(&mut self) {
        if self.started {
            return;
        }
        self.started = true;
        self.out.extend_from_slice(frame::PREFACE);
        frame::put_settings(
            &mut self.out,
            &[
                (frame::SETTINGS_ENABLE_PUSH, 0),
                (frame::SETTINGS_INITIAL_WINDOW_SIZE, self.settings.window),
            ],
        );
        if self.settings.window > frame::DEFAULT_WINDOW {
            frame::put_window_update(
                &mut self.out,
                0,
                self.settings.window - frame::DEFAULT_WINDOW,
            );
        }
    }

    /// Queue a request on a new stream: its header `block` (and `body` in one DATA frame), after
    /// the preface on the connection's first. `can_open` must be true.
    pub fn start_stream(
        &mut self,
        url: usize,
        block: &[u8],
        body: &[u8],
        intended: Instant,
        now: Instant,
    ) {
        debug_assert!(self.can_open() && body.len() <= MAX_REQUEST_BODY);
        self.greet();
        let id = self.next_id;
        self.next_id += 2;
        let end = if body.is_empty() {
            frame::FLAG_END_STREAM
        } else {
            0
        };
        frame::put_header(
            &mut self.out,
            block.len(),
            frame::HEADERS,
            frame::FLAG_END_HEADERS | end,
            id,
        );
        self.out.extend_from_slice(block);
        if !body.is_empty() {
            frame::put_header(
                &mut self.out,
                body.len(),
                frame::DATA,
                frame::FLAG_END_STREAM,
                id,
            );
            self.out.extend_from_slice(body);
        }
        self.streams.insert(
            id,
            Stream {
                url,
                sent_at: now,
                intended,
                status: 0,
                body_len: 0,
                hasher: self.want_digest.then(Sha256::new),
                unacked: 0,
            },
        );
    }

    /// Bytes from the server: every complete frame is handled (events into `events`, replies into
    /// the outbox), an incomplete one is carried to the next call. An error is a connection error
    /// (RFC 9113, 5.4.1): the connection cannot go on.
    pub fn receive(&mut self, data: &[u8]) -> Result<(), String> {
        let mut carry = std::mem::take(&mut self.carry);
        let from_carry = !carry.is_empty();
        if from_carry {
            carry.extend_from_slice(data);
        }
        let buf: &[u8] = if from_carry { &carry } else { data };
        let mut pos = 0;
        let result = loop {
            if buf.len() - pos < frame::HEADER_LEN {
                break Ok(());
            }
            let h = Header::parse(&buf[pos..]);
            if h.len > frame::DEFAULT_MAX_FRAME {
                break Err(format!(
                    "a frame of {} bytes, more than the {} the client allows (FRAME_SIZE_ERROR)",
                    h.len,
                    frame::DEFAULT_MAX_FRAME
                ));
            }
            let end = pos + frame::HEADER_LEN + h.len;
            if end > buf.len() {
                break Ok(());
            }
            if let Err(e) = self.on_frame(&h, &buf[pos + frame::HEADER_LEN..end]) {
                break Err(e);
            }
            pos = end;
        };
        if result.is_ok() {
            if from_carry {
                carry.drain(..pos);
            } else {
                carry.extend_from_slice(&data[pos..]);
            }
            self.carry = carry;
        }
        result
    }

    fn on_frame(&mut self, h: &Header, payload: &[u8]) -> Result<(), String> {
        if let Some(p) = &self.pending {
            if h.kind != frame::CONTINUATION || h.stream != p.stream {
                return Err(format!(
                    "a frame of type {} on stream {} where the CONTINUATION of stream {}'s headers was due (PROTOCOL_ERROR)",
                    h.kind, h.stream, p.stream
                ));
            }
        }
        let needs_stream = matches!(
            h.kind,
            frame::DATA | frame::HEADERS | frame::RST_STREAM | frame::CONTINUATION
        );
        if needs_stream && h.stream == 0 {
            return Err(format!(
                "a frame of type {} on stream 0 (PROTOCOL_ERROR)",
                h.kind
            ));
        }
        match h.kind {
            frame::DATA => self.on_data(h, payload),
            frame::HEADERS => {
                let (start, end) = frame::unpadded(h, payload)
                    .ok_or("HEADERS padding longer than the frame (PROTOCOL_ERROR)")?;
                let start = if h.has(frame::FLAG_PRIORITY) {
                    start + 5
                } else {
                    start
                };
                if start > end {
                    return Err(
                        "HEADERS too short for its priority fields (FRAME_SIZE_ERROR)".into(),
                    );
                }
                self.on_block_fragment(
                    h.stream,
                    h.has(frame::FLAG_END_STREAM),
                    &payload[start..end],
                    h.has(frame::FLAG_END_HEADERS),
                )
            }
            frame::CONTINUATION => {
                let Some(p) = &self.pending else {
                    return Err(format!(
                        "a CONTINUATION on stream {} after a complete header block (PROTOCOL_ERROR)",
                        h.stream
                    ));
                };
                self.on_block_fragment(
                    p.stream,
                    p.end_stream,
                    payload,
                    h.has(frame::FLAG_END_HEADERS),
                )
            }
            frame::RST_STREAM => {
                if payload.len() != 4 {
                    return Err("RST_STREAM of a length other than 4 (FRAME_SIZE_ERROR)".into());
                }
                if let Some(s) = self.streams.remove(&h.stream) {
                    self.events.push(Event::Reset {
                        url: s.url,
                        code: frame::u32_at(payload, 0),
                    });
                }
                Ok(())
            }
            frame::SETTINGS => self.on_settings(h, payload),
            frame::PUSH_PROMISE => Err(
                "PUSH_PROMISE, though the client's SETTINGS disabled push (PROTOCOL_ERROR)".into(),
            ),
            frame::PING => {
                if payload.len() != 8 {
                    return Err("PING of a length other than 8 (FRAME_SIZE_ERROR)".into());
                }
                if !h.has(frame::FLAG_ACK) {
                    frame::put_ping_ack(&mut self.out, payload);
                }
                Ok(())
            }
            frame::GOAWAY => {
                if payload.len() < 8 {
                    return Err("GOAWAY shorter than 8 bytes (FRAME_SIZE_ERROR)".into());
                }
                let last_stream = frame::u32_at(payload, 0) & frame::MAX_STREAM_ID;
                let before = self.streams.len();
                self.streams.retain(|&id, _| id <= last_stream);
                self.going_away = true;
                self.events.push(Event::GoAway {
                    code: frame::u32_at(payload, 4),
                    last_stream,
                    unprocessed: before - self.streams.len(),
                    debug: String::from_utf8_lossy(&payload[8..])
                        .chars()
                        .take(200)
                        .collect(),
                });
                Ok(())
            }
            frame::WINDOW_UPDATE => {
                if payload.len() != 4 {
                    return Err("WINDOW_UPDATE of a length other than 4 (FRAME_SIZE_ERROR)".into());
                }
                // The client's requests fit every window a server starts with (see the module's
                // comment), so it does not track its send windows.
                Ok(())
            }
            // PRIORITY is deprecated and unknown types are ignored (RFC 9113, 5.5).
            _ => Ok(()),
        }
    }

    fn on_data(&mut self, h: &Header, payload: &[u8]) -> Result<(), String> {
        if h.stream >= self.next_id {
            return Err(format!(
                "DATA on stream {}, which the client never opened (PROTOCOL_ERROR)",
                h.stream
            ));
        }
        // The whole frame, padding included, counts against the windows (RFC 9113, 6.1).
        self.conn_unacked = self.conn_unacked.saturating_add(payload.len() as u32);
        if self.conn_unacked >= self.settings.window / 2 {
            frame::put_window_update(&mut self.out, 0, self.conn_unacked);
            self.conn_unacked = 0;
        }
        let (start, end) = frame::unpadded(h, payload)
            .ok_or("DATA padding longer than the frame (PROTOCOL_ERROR)")?;
        // A stream reset, or dropped by a GOAWAY, may still have data on the way: counted above.
        let Some(s) = self.streams.get_mut(&h.stream) else {
            return Ok(());
        };
        if s.status == 0 {
            return Err(format!(
                "DATA on stream {} before its response headers (PROTOCOL_ERROR)",
                h.stream
            ));
        }
        let body = &payload[start..end];
        s.body_len += body.len() as u64;
        if let Some(hasher) = s.hasher.as_mut() {
            hasher.update(body);
        }
        if h.has(frame::FLAG_END_STREAM) {
            self.finish(h.stream);
            return Ok(());
        }
        s.unacked = s.unacked.saturating_add(payload.len() as u32);
        if s.unacked >= self.settings.window / 2 {
            frame::put_window_update(&mut self.out, h.stream, s.unacked);
            s.unacked = 0;
        }
        Ok(())
    }

    /// A HEADERS or CONTINUATION fragment; the block is decoded once complete (every block is, the
    /// dynamic table depends on it, even a block of a stream the client no longer waits for).
    fn on_block_fragment(
        &mut self,
        stream: u32,
        end_stream: bool,
        fragment: &[u8],
        end_headers: bool,
    ) -> Result<(), String> {
        let block = match self.pending.take() {
            Some(mut p) => {
                p.block.extend_from_slice(fragment);
                p.block
            }
            None if end_headers => return self.on_block(stream, end_stream, fragment),
            None => fragment.to_vec(),
        };
        if block.len() > MAX_HEADER_BLOCK {
            return Err(format!(
                "a header block of more than {MAX_HEADER_BLOCK} bytes on stream {stream}"
            ));
        }
        if end_headers {
            return self.on_block(stream, end_stream, &block);
        }
        self.pending = Some(PendingBlock {
            stream,
            end_stream,
            block,
        });
        Ok(())
    }

    fn on_block(&mut self, stream: u32, end_stream: bool, block: &[u8]) -> Result<(), String> {
        let mut status: Option<Result<u16, String>> = None;
        self.decoder
            .decode(block, |name, value| {
                if status.is_none() && name == b":status" {
                    status = Some(
                        std::str::from_utf8(value)
                            .ok()
                            .and_then(|v| v.parse::<u16>().ok())
                            .filter(|v| (100..1000).contains(v))
                            .ok_or_else(|| format!(":status {:?}", String::from_utf8_lossy(value))),
                    );
                }
            })
            .map_err(|e| format!("a header block that does not decode: {e} (COMPRESSION_ERROR)"))?;
        if stream >= self.next_id {
            return Err(format!(
                "HEADERS on stream {stream}, which the client never opened (PROTOCOL_ERROR)"
            ));
        }
        let Some(s) = self.streams.get_mut(&stream) else {
            return Ok(());
        };
        if s.status == 0 {
            let code = match status {
                Some(Ok(code)) => code,
                Some(Err(bad)) => {
                    return Err(format!(
                        "stream {stream}: response with {bad} (PROTOCOL_ERROR)"
                    ))
                }
                None => {
                    return Err(format!(
                        "stream {stream}: response headers without :status (PROTOCOL_ERROR)"
                    ))
                }
            };
            if code < 200 {
                // Informational (100 Continue, 103 Early Hints): the final headers follow.
                return Ok(());
            }
            s.status = code;
        } else if !end_stream {
            return Err(format!(
                "stream {stream}: trailers without END_STREAM (PROTOCOL_ERROR)"
            ));
        }
        if end_stream || self.head_request {
            self.finish(stream);
        }
        Ok(())
    }

    fn finish(&mut self, stream: u32) {
        let s = self
            .streams
            .remove(&stream)
            .expect("the stream is in flight");
        self.events.push(Event::Done {
            url: s.url,
            sent_at: s.sent_at,
            intended: s.intended,
            response: Response {
                status: s.status,
                body_len: s.body_len,
                body_sha256: s.hasher.map(|h| h.finalize().into()),
                keep_alive: true,
            },
        });
    }

    fn on_settings(&mut self, h: &Header, payload: &[u8]) -> Result<(), String> {
        if h.stream != 0 {
            return Err("SETTINGS on a stream other than 0 (PROTOCOL_ERROR)".into());
        }
        if h.has(frame::FLAG_ACK) {
            return if payload.is_empty() {
                Ok(())
            } else {
                Err("a SETTINGS acknowledgement with a payload (FRAME_SIZE_ERROR)".into())
            };
        }
        if !payload.len().is_multiple_of(6) {
            return Err(
                "SETTINGS of a length that is not a multiple of 6 (FRAME_SIZE_ERROR)".into(),
            );
        }
        for pair in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([pair[0], pair[1]]);
            let value = frame::u32_at(pair, 2);
            match id {
                frame::SETTINGS_MAX_CONCURRENT_STREAMS => self.peer_max_streams = value,
                frame::SETTINGS_INITIAL_WINDOW_SIZE if value > frame::MAX_WINDOW => {
                    return Err(format!(
                        "SETTINGS_INITIAL_WINDOW_SIZE {value}, above 2^31-1 (FLOW_CONTROL_ERROR)"
                    ))
                }
                frame::SETTINGS_MAX_FRAME_SIZE if !(16_384..=16_777_215).contains(&value) => {
                    return Err(format!(
                        "SETTINGS_MAX_FRAME_SIZE {value}, outside 16384..16777215 (PROTOCOL_ERROR)"
                    ))
                }
                frame::SETTINGS_ENABLE_PUSH if value > 1 => {
                    return Err(format!("SETTINGS_ENABLE_PUSH {value} (PROTOCOL_ERROR)"))
                }
                // The client's header blocks never use the dynamic table, whatever its size.
                _ => {}
            }
        }
        frame::put_settings_ack(&mut self.out);
        Ok(())
    }
}

/// What a connection with streams 1, 3 and 5 in flight made of `pieces` received one after another:
/// its events, its replies (the outbox) and the connection error, if any (the error ends it).
fn received_in(pieces: &[&[u8]], now: Instant) -> (Vec<String>, Vec<u8>, Option<String>) {
    let mut c = H2Conn::new(
        H2Settings {
            streams: 3,
            window: 100,
        },
        true,
        false,
    );
    for url in 0..3 {
        c.start_stream(url, &[0x82, 0x86, 0x84], b"", now, now);
    }
    c.wrote(c.unsent().len());
    let mut events = Vec::new();
    for piece in pieces {
        let result = c.receive(piece);
        events.extend(c.events.drain(..).map(|e| format!("{e:?}")));
        if let Err(e) = result {
            return (events, c.unsent().to_vec(), Some(e));
        }
    }
    (events, c.unsent().to_vec(), None)
}

/// The fuzz property (`fuzz/fuzz_targets/h2_frames.rs`): whatever a server sends, the connection
/// never panics, and cutting the bytes in two (where the first byte says) changes nothing: the same
/// events, replies and error as in one read.
pub fn check_fuzz_input(data: &[u8]) -> Result<(), String> {
    let Some((&split, stream)) = data.split_first() else {
        return Ok(());
    };
    let at = usize::from(split) * stream.len() / 256;
    let now = Instant::now();
    let whole = received_in(&[stream], now);
    let cut = received_in(&[&stream[..at], &stream[at..]], now);
    if whole == cut {
        Ok(())
    } else {
        Err(format!(
            "cut at {at} changed what was received: whole {whole:?}, cut {cut:?}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(streams: u32, window: u32) -> H2Conn {
        H2Conn::new(H2Settings { streams, window }, false, false)
    }

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        frame::put_header(&mut out, payload.len(), kind, flags, stream);
        out.extend_from_slice(payload);
        out
    }

    /// `:status 200` (static index 8).
    const STATUS_200: &[u8] = &[0x88];

    fn open(c: &mut H2Conn, n: usize) {
        let now = Instant::now();
        for url in 0..n {
            c.start_stream(url, &[0x82, 0x86, 0x84], b"", now, now);
        }
    }

    fn done(c: &H2Conn) -> Vec<(usize, u16, u64)> {
        c.events
            .iter()
            .filter_map(|e| match e {
                Event::Done { url, response, .. } => {
                    Some((*url, response.status, response.body_len))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_first_stream_sends_the_preface_settings_and_window_then_its_headers() {
        let mut c = conn(2, 1 << 20);
        open(&mut c, 1);
        let out = c.unsent().to_vec();
        assert!(out.starts_with(frame::PREFACE));
        let mut at = frame::PREFACE.len();
        let mut kinds = Vec::new();
        while at < out.len() {
            let h = Header::parse(&out[at..]);
            kinds.push((h.kind, h.stream));
            at += frame::HEADER_LEN + h.len;
        }
        assert_eq!(
            kinds,
            [
                (frame::SETTINGS, 0),
                (frame::WINDOW_UPDATE, 0),
                (frame::HEADERS, 1)
            ]
        );
        c.wrote(out.len());
        assert!(c.unsent().is_empty());
        open(&mut c, 1);
        assert_eq!(Header::parse(c.unsent()).stream, 3);
    }

    #[test]
    fn responses_complete_out_of_order_and_split_anywhere() {
        let mut bytes = frame(frame::SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100]);
        bytes.extend(frame(
            frame::HEADERS,
            frame::FLAG_END_HEADERS,
            3,
            STATUS_200,
        ));
        bytes.extend(frame(
            frame::HEADERS,
            frame::FLAG_END_HEADERS,
            1,
            STATUS_200,
        ));
        bytes.extend(frame(frame::DATA, frame::FLAG_END_STREAM, 3, b"three"));
        bytes.extend(frame(frame::DATA, 0, 1, b"o"));
        bytes.extend(frame(frame::DATA, frame::FLAG_END_STREAM, 1, b"ne"));
        for cut in 0..bytes.len() {
            let mut c = conn(2, 65_535);
            open(&mut c, 2);
            c.receive(&bytes[..cut]).unwrap();
            c.receive(&bytes[cut..]).unwrap();
            assert_eq!(done(&c), [(1, 200, 5), (0, 200, 3)], "cut {cut}");
            assert_eq!(c.in_flight(), 0);
        }
    }

    #[test]
    fn settings_are_acknowledged_pings_answered_and_the_streams_capped() {
        let mut c = conn(10, 65_535);
        open(&mut c, 1);
        c.wrote(c.unsent().len());
        let mut bytes = frame(frame::SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 2]);
        bytes.extend(frame(frame::PING, 0, 0, b"12345678"));
        c.receive(&bytes).unwrap();
        assert_eq!(
            c.unsent(),
            [
                frame(frame::SETTINGS, frame::FLAG_ACK, 0, b""),
                frame(frame::PING, frame::FLAG_ACK, 0, b"12345678")
            ]
            .concat()
        );
        open(&mut c, 1);
        assert!(!c.can_open(), "the server allows 2 streams");
    }

    #[test]
    fn consumed_data_is_given_back_once_half_a_window_is_used() {
        let mut c = conn(1, 100);
        open(&mut c, 1);
        c.wrote(c.unsent().len());
        let mut bytes = frame(frame::HEADERS, frame::FLAG_END_HEADERS, 1, STATUS_200);
        bytes.extend(frame(frame::DATA, 0, 1, &[b'x'; 60]));
        c.receive(&bytes).unwrap();
        assert_eq!(
            c.unsent(),
            [
                frame(frame::WINDOW_UPDATE, 0, 0, &60u32.to_be_bytes()),
                frame(frame::WINDOW_UPDATE, 0, 1, &60u32.to_be_bytes())
            ]
            .concat()
        );
    }

    #[test]
    fn a_reset_and_a_goaway_end_their_streams_with_events() {
        let mut c = conn(3, 65_535);
        open(&mut c, 3);
        let mut bytes = frame(frame::RST_STREAM, 0, 1, &8u32.to_be_bytes());
        let mut goaway = 3u32.to_be_bytes().to_vec();
        goaway.extend(0u32.to_be_bytes());
        goaway.extend(b"bye");
        bytes.extend(frame(frame::GOAWAY, 0, 0, &goaway));
        c.receive(&bytes).unwrap();
        assert!(matches!(c.events[0], Event::Reset { url: 0, code: 8 }));
        match &c.events[1] {
            Event::GoAway {
                code: 0,
                last_stream: 3,
                unprocessed: 1,
                debug,
            } => assert_eq!(debug, "bye"),
            other => panic!("{other:?}"),
        }
        assert_eq!(c.in_flight(), 1);
        assert!(!c.can_open() && c.closing());
    }

    #[test]
    fn continuation_completes_a_block_and_a_1xx_waits_for_the_final_status() {
        let mut c = conn(1, 65_535);
        open(&mut c, 1);
        // 103 Early Hints (literal :status, indexed name 8), then 200 split over a CONTINUATION.
        let mut bytes = frame(
            frame::HEADERS,
            frame::FLAG_END_HEADERS,
            1,
            &[0x08, 3, b'1', b'0', b'3'],
        );
        bytes.extend(frame(frame::HEADERS, frame::FLAG_END_STREAM, 1, &[]));
        bytes.extend(frame(
            frame::CONTINUATION,
            frame::FLAG_END_HEADERS,
            1,
            STATUS_200,
        ));
        c.receive(&bytes).unwrap();
        assert_eq!(done(&c), [(0, 200, 0)]);
    }

    #[test]
    fn protocol_violations_are_connection_errors_naming_what_was_wrong() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (frame(frame::DATA, 0, 7, b"x"), "never opened"),
            (
                frame(frame::DATA, 0, 1, b"x"),
                "before its response headers",
            ),
            (frame(frame::PUSH_PROMISE, 0, 1, &[0; 4]), "disabled push"),
            (frame(frame::HEADERS, 0, 0, STATUS_200), "stream 0"),
            (frame(frame::PING, 0, 0, b"short"), "PING"),
            (
                frame(frame::HEADERS, frame::FLAG_END_HEADERS, 1, &[0x82]),
                "without :status",
            ),
            (
                frame(frame::HEADERS, frame::FLAG_END_HEADERS, 1, &[0xff, 0xff]),
                "COMPRESSION_ERROR",
            ),
            (
                [
                    frame(frame::HEADERS, 0, 1, STATUS_200),
                    frame(frame::PING, 0, 0, b"12345678"),
                ]
                .concat(),
                "CONTINUATION",
            ),
        ];
        for (bytes, what) in cases {
            let mut c = conn(1, 65_535);
            open(&mut c, 1);
            let err = c.receive(&bytes).unwrap_err();
            assert!(err.contains(what), "{what}: {err}");
        }
        let mut c = conn(1, 65_535);
        open(&mut c, 1);
        let mut huge = Vec::new();
        frame::put_header(&mut huge, frame::DEFAULT_MAX_FRAME + 1, frame::DATA, 0, 1);
        assert!(c.receive(&huge).unwrap_err().contains("FRAME_SIZE_ERROR"));
    }

    #[test]
    fn the_fuzz_property_holds_on_garbage_and_on_real_frames_cut_anywhere() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in 0..2000 {
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            check_fuzz_input(&data).unwrap();
        }
        let mut real = frame(frame::SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100]);
        real.extend(frame(
            frame::HEADERS,
            frame::FLAG_END_HEADERS,
            3,
            STATUS_200,
        ));
        real.extend(frame(frame::DATA, 0, 3, &[b'x'; 70]));
        real.extend(frame(frame::RST_STREAM, 0, 1, &8u32.to_be_bytes()));
        real.extend(frame(frame::DATA, frame::FLAG_END_STREAM, 3, b"end"));
        for split in 0..=255u8 {
            check_fuzz_input(&[&[split][..], &real].concat()).unwrap();
        }
    }
}
