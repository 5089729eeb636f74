//! The incremental HTTP/1.1 response parser: works in place on whatever the socket delivered.
//!
//! It never copies a body: it counts it and, only when a digest is expected, feeds it to SHA-256.
//! Chunked framing is a byte-level state machine, so a chunk-size line or CRLF split across two reads
//! needs no buffering; only an incomplete response head is carried over to the next read.

use sha2::{Digest, Sha256};

/// A response head larger than this is a `parse_error` (real servers send a few hundred bytes).
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Headers beyond this count make the head unparseable.
const MAX_HEADERS: usize = 64;
/// Per-thread read buffer. Larger than MAX_HEAD_BYTES so an incomplete head carried over from the
/// previous read still leaves room to read the rest.
pub(crate) const SCRATCH_BYTES: usize = 2 * MAX_HEAD_BYTES;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub body_len: u64,
    pub body_sha256: Option<[u8; 32]>,
    /// False when the server will close after this response (`Connection: close`, HTTP/1.0
    /// without keep-alive, or a close-delimited body).
    pub keep_alive: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// All of the input was useful but the response is not complete; `consumed` bytes may be
    /// dropped, the rest (an incomplete head) must be presented again with more data.
    NeedMore(usize),
    /// A response ended after `consumed` bytes of the input.
    Done(usize, Response),
    Error(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Head,
    Length {
        remaining: u64,
    },
    ChunkSize {
        size: u64,
        digits: u32,
        in_extension: bool,
        seen_cr: bool,
    },
    ChunkData {
        remaining: u64,
    },
    ChunkDataCr,
    ChunkDataLf,
    Trailer {
        line_bytes: usize,
    },
    UntilClose,
}

pub struct ResponseParser {
    state: State,
    status: u16,
    keep_alive: bool,
    body_len: u64,
    hasher: Option<Sha256>,
    /// The request was HEAD: responses have no body whatever their headers say.
    head_request: bool,
}

impl ResponseParser {
    pub fn new(want_digest: bool, head_request: bool) -> Self {
        ResponseParser {
            state: State::Head,
            status: 0,
            keep_alive: true,
            body_len: 0,
            hasher: want_digest.then(Sha256::new),
            head_request,
        }
    }

    /// Forget any partial response (the connection it belonged to is gone).
    pub fn reset(&mut self) {
        self.state = State::Head;
        self.body_len = 0;
        if let Some(h) = self.hasher.as_mut() {
            h.reset();
        }
    }

    /// True between the first byte of a response head being consumed and the response's end.
    pub fn in_body(&self) -> bool {
        self.state != State::Head
    }

    /// The peer closed the connection: completes a close-delimited body, otherwise None.
    pub fn on_eof(&mut self) -> Option<Response> {
        if self.state == State::UntilClose {
            Some(self.finish())
        } else {
            None
        }
    }

    fn finish(&mut self) -> Response {
        let body_sha256 = self.hasher.as_mut().map(|h| h.finalize_reset().into());
        let r = Response {
            status: self.status,
            body_len: self.body_len,
            body_sha256,
            keep_alive: self.keep_alive,
        };
        self.state = State::Head;
        self.body_len = 0;
        r
    }

    #[inline]
    fn body(&mut self, data: &[u8]) {
        self.body_len += data.len() as u64;
        if let Some(h) = self.hasher.as_mut() {
            h.update(data);
        }
    }

    /// Parse as much of `buf` as possible, stopping at the end of the first complete response.
    pub fn advance(&mut self, buf: &[u8]) -> Step {
        let mut pos = 0;
        loop {
            match self.state {
                State::Head => {
                    if pos == buf.len() {
                        return Step::NeedMore(pos);
                    }
                    match self.parse_head(&buf[pos..]) {
                        Ok(Some((n, done))) => {
                            pos += n;
                            if done {
                                return Step::Done(pos, self.finish());
                            }
                        }
                        Ok(None) => return Step::NeedMore(pos),
                        Err(e) => return Step::Error(e),
                    }
                }
                State::Length { remaining } => {
                    let take = remaining.min((buf.len() - pos) as u64) as usize;
                    self.body(&buf[pos..pos + take]);
                    pos += take;
                    if take as u64 == remaining {
                        return Step::Done(pos, self.finish());
                    }
                    self.state = State::Length {
                        remaining: remaining - take as u64,
                    };
                    return Step::NeedMore(pos);
                }
                State::ChunkData { remaining } => {
                    let take = remaining.min((buf.len() - pos) as u64) as usize;
                    self.body(&buf[pos..pos + take]);
                    pos += take;
                    if take as u64 == remaining {
                        self.state = State::ChunkDataCr;
                    } else {
                        self.state = State::ChunkData {
                            remaining: remaining - take as u64,
                        };
                        return Step::NeedMore(pos);
                    }
                }
                State::UntilClose => {
                    self.body(&buf[pos..]);
                    return Step::NeedMore(buf.len());
                }
                _ => {
                    // The byte-at-a-time states: chunk-size line, CRLF after data, trailer.
                    let Some(&b) = buf.get(pos) else {
                        return Step::NeedMore(pos);
                    };
                    pos += 1;
                    if let Some(step) = self.framing_byte(b, pos) {
                        return step;
                    }
                }
            }
        }
    }

    fn framing_byte(&mut self, b: u8, pos: usize) -> Option<Step> {
        match self.state {
            State::ChunkSize {
                size,
                digits,
                in_extension,
                seen_cr,
            } => {
                if seen_cr && b != b'\n' {
                    return Some(Step::Error("chunk-size line: CR not followed by LF".into()));
                }
                match b {
                    b'\n' => {
                        if digits == 0 {
                            return Some(Step::Error(
                                "chunk-size line without a hexadecimal size".into(),
                            ));
                        }
                        self.state = if size == 0 {
                            State::Trailer { line_bytes: 0 }
                        } else {
                            State::ChunkData { remaining: size }
                        };
                    }
                    b'\r' => {
                        self.state = State::ChunkSize {
                            size,
                            digits,
                            in_extension,
                            seen_cr: true,
                        }
                    }
                    _ if in_extension => {}
                    b';' | b' ' | b'\t' => {
                        self.state = State::ChunkSize {
                            size,
                            digits,
                            in_extension: true,
                            seen_cr,
                        }
                    }
                    _ => {
                        let Some(d) = (b as char).to_digit(16) else {
                            return Some(Step::Error(format!(
                                "chunk size: unexpected byte 0x{b:02x}"
                            )));
                        };
                        if digits >= 15 {
                            return Some(Step::Error("chunk size too large".into()));
                        }
                        self.state = State::ChunkSize {
                            size: size * 16 + u64::from(d),
                            digits: digits + 1,
                            in_extension,
                            seen_cr,
                        };
                    }
                }
            }
            State::ChunkDataCr => match b {
                b'\r' => self.state = State::ChunkDataLf,
                b'\n' => {
                    self.state = State::ChunkSize {
                        size: 0,
                        digits: 0,
                        in_extension: false,
                        seen_cr: false,
                    }
                }
                _ => {
                    return Some(Step::Error(
                        "chunk data longer than its declared size".into(),
                    ))
                }
            },
            State::ChunkDataLf => match b {
                b'\n' => {
                    self.state = State::ChunkSize {
                        size: 0,
                        digits: 0,
                        in_extension: false,
                        seen_cr: false,
                    }
                }
                _ => return Some(Step::Error("chunk data not followed by CRLF".into())),
            },
            State::Trailer { line_bytes } => match b {
                b'\n' if line_bytes == 0 => return Some(Step::Done(pos, self.finish())),
                b'\n' => self.state = State::Trailer { line_bytes: 0 },
                b'\r' => {}
                _ if line_bytes >= MAX_HEAD_BYTES => {
                    return Some(Step::Error("chunked trailer too large".into()))
                }
                _ => {
                    self.state = State::Trailer {
                        line_bytes: line_bytes + 1,
                    }
                }
            },
            _ => unreachable!("framing_byte called in a bulk state"),
        }
        None
    }

    /// Ok(None): incomplete head. Ok(Some((consumed, response_complete))).
    fn parse_head(&mut self, buf: &[u8]) -> Result<Option<(usize, bool)>, String> {
        // Uninitialised header slots: zeroing 64 of them for every response would cost more than
        // parsing a typical head.
        let mut headers =
            [const { std::mem::MaybeUninit::<httparse::Header>::uninit() }; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut []);
        let n = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut resp,
            buf,
            &mut headers,
        ) {
            // A head over the limit is an error even when it arrived complete in one read, so
            // whether it is accepted never depends on how the bytes were split into reads.
            Ok(httparse::Status::Complete(n)) if n > MAX_HEAD_BYTES => {
                return Err(format!("response head larger than {MAX_HEAD_BYTES} bytes"))
            }
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD_BYTES => {
                return Err(format!("response head larger than {MAX_HEAD_BYTES} bytes"))
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(format!("invalid response head: {e}")),
        };
        let status = resp.code.unwrap_or(0);
        let version = resp.version.unwrap_or(1);
        let mut content_length: Option<u64> = None;
        // Whether the final transfer coding is chunked, whether any Transfer-Encoding line was
        // seen, and whether those lines named any coding at all.
        let mut chunked = false;
        let mut te_present = false;
        let mut te_codings = false;
        let mut conn_close = false;
        let mut conn_keep_alive = false;
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                let v = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok());
                match (v, content_length) {
                    (None, _) => return Err("invalid Content-Length".into()),
                    (Some(a), Some(b)) if a != b => {
                        return Err("conflicting Content-Length headers".into())
                    }
                    (Some(a), _) => content_length = Some(a),
                }
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                // Several Transfer-Encoding lines are one list in order (RFC 9110 §5.3), so only
                // the last coding over all of them counts; empty elements are ignored.
                te_present = true;
                for coding in h.value.split(|&c| c == b',') {
                    let coding = coding.trim_ascii();
                    if !coding.is_empty() {
                        chunked = coding.eq_ignore_ascii_case(b"chunked");
                        te_codings = true;
                    }
                }
            } else if h.name.eq_ignore_ascii_case("connection") {
                for token in h.value.split(|&c| c == b',') {
                    let t = token.trim_ascii();
                    conn_close |= t.eq_ignore_ascii_case(b"close");
                    conn_keep_alive |= t.eq_ignore_ascii_case(b"keep-alive");
                }
            }
        }
        self.status = status;
        self.keep_alive = !conn_close && (version == 1 || conn_keep_alive);
        self.body_len = 0;
        if (100..200).contains(&status) && status != 101 {
            // Interim response (100 Continue, 103 Early Hints): the real one follows.
            return Ok(Some((n, false)));
        }
        if self.head_request || status == 204 || status == 304 || status == 101 {
            return Ok(Some((n, true)));
        }
        // RFC 9112 §6.3: Transfer-Encoding overrides Content-Length; with chunked as the final
        // coding the body is chunked, with any other final coding it runs until the close (its
        // bytes are counted and digested as received, still encoded).
        if te_present && !te_codings {
            return Err("Transfer-Encoding without a coding".into());
        }
        if chunked {
            self.state = State::ChunkSize {
                size: 0,
                digits: 0,
                in_extension: false,
                seen_cr: false,
            };
        } else if let Some(len) = content_length.filter(|_| !te_present) {
            if len == 0 {
                return Ok(Some((n, true)));
            }
            self.state = State::Length { remaining: len };
        } else {
            self.keep_alive = false;
            self.state = State::UntilClose;
        }
        Ok(Some((n, false)))
    }
}

/// Feed `pieces` to a parser the way the engine does (an incomplete head is carried over to the
/// next piece; bodies never are), then signal EOF. Returns the responses or the first error.
/// Public for the fuzz target.
pub fn parse_pieces(pieces: &[&[u8]], want_digest: bool) -> Result<Vec<Response>, String> {
    let mut p = ResponseParser::new(want_digest, false);
    let mut carry: Vec<u8> = Vec::new();
    let mut out = Vec::new();
    for piece in pieces {
        let mut buf = std::mem::take(&mut carry);
        buf.extend_from_slice(piece);
        let mut pos = 0;
        while pos < buf.len() {
            match p.advance(&buf[pos..]) {
                Step::NeedMore(k) => {
                    pos += k;
                    break;
                }
                Step::Done(k, r) => {
                    pos += k;
                    out.push(r);
                }
                Step::Error(e) => return Err(e),
            }
        }
        carry = buf[pos..].to_vec();
    }
    if carry.is_empty() {
        if let Some(r) = p.on_eof() {
            out.push(r);
        }
    }
    Ok(out)
}

/// The response parser's fuzz property, shared by the fuzz target (fuzz/fuzz_targets/
/// response_parser.rs, built only with cargo-fuzz) and the seeded corpus test below (run by every
/// `cargo test`), so the property that is tested always is the one that is fuzzed.
#[doc(hidden)]
pub mod fuzzing {
    use super::parse_pieces;

    /// The parser on `stream` cut at `cuts` (ascending offsets) must not panic and must find what
    /// it finds on the whole stream: the same responses, or an error in both cases.
    pub fn check_cuts(stream: &[u8], cuts: &[usize]) -> Result<(), String> {
        let whole = parse_pieces(&[stream], true);
        let mut pieces = Vec::with_capacity(cuts.len() + 1);
        let mut from = 0;
        for &at in cuts {
            pieces.push(&stream[from..at]);
            from = at;
        }
        pieces.push(&stream[from..]);
        let cut = parse_pieces(&pieces, true);
        match (&whole, &cut) {
            (Ok(a), Ok(b)) if a == b => Ok(()),
            (Err(_), Err(_)) => Ok(()),
            _ => Err(format!(
                "cut at {cuts:?} changed the result: whole {whole:?}, cut {cut:?}, input {:?}",
                String::from_utf8_lossy(stream)
            )),
        }
    }

    /// One fuzz input: the first byte picks where the rest is cut in two.
    pub fn check_fuzz_input(data: &[u8]) -> Result<(), String> {
        let Some((&split, stream)) = data.split_first() else {
            return Ok(());
        };
        check_cuts(stream, &[usize::from(split) * stream.len() / 256])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::*;

    fn digest(b: &[u8]) -> [u8; 32] {
        Sha256::digest(b).into()
    }

    /// Several framings back to back, ending with a close-delimited body.
    const STREAM: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: t\r\n\r\nhello\
HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: y\r\n\r\n\
HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n\
HTTP/1.1 503 Busy\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n\
HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n\
HTTP/1.0 200 OK\r\n\r\nbody until close";

    fn expected() -> Vec<Response> {
        let r = |status, body: &[u8], keep_alive| Response {
            status,
            body_len: body.len() as u64,
            body_sha256: Some(digest(body)),
            keep_alive,
        };
        vec![
            r(200, b"hello", true),
            r(200, b"hello0123456789", true),
            r(204, b"", true),
            r(503, b"", false),
            r(200, b"abc", true),
            r(200, b"body until close", false),
        ]
    }

    #[test]
    fn whole_stream() {
        assert_eq!(parse_pieces(&[STREAM], true).unwrap(), expected());
    }

    #[test]
    fn split_at_every_byte_boundary() {
        for i in 0..=STREAM.len() {
            let got = parse_pieces(&[&STREAM[..i], &STREAM[i..]], true)
                .unwrap_or_else(|e| panic!("split at {i}: {e}"));
            assert_eq!(got, expected(), "split at {i}");
        }
    }

    #[test]
    fn one_byte_at_a_time() {
        let pieces: Vec<&[u8]> = STREAM.chunks(1).collect();
        assert_eq!(parse_pieces(&pieces, true).unwrap(), expected());
    }

    #[test]
    fn without_digest_bodies_are_only_counted() {
        let got = parse_pieces(&[STREAM], false).unwrap();
        assert!(got.iter().all(|r| r.body_sha256.is_none()));
        assert_eq!(
            got.iter().map(|r| r.body_len).collect::<Vec<_>>(),
            [5, 15, 0, 0, 3, 16]
        );
    }

    #[test]
    fn eof_inside_a_length_delimited_body_is_not_a_response() {
        let got = parse_pieces(
            &[b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"],
            false,
        )
        .unwrap();
        assert!(got.is_empty());
    }

    #[test]
    fn head_request_has_no_body() {
        let mut p = ResponseParser::new(false, true);
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n";
        assert_eq!(
            p.advance(wire),
            Step::Done(
                wire.len(),
                Response {
                    status: 200,
                    body_len: 0,
                    body_sha256: None,
                    keep_alive: true
                }
            )
        );
    }

    #[test]
    fn malformed_responses_are_errors() {
        for bad in [
            &b"HTTP/1.1 2x0 OK\r\n\r\n"[..],
            b"SSH-2.0-OpenSSH\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n",
        ] {
            assert!(
                parse_pieces(&[bad], false).is_err(),
                "{:?} accepted",
                String::from_utf8_lossy(bad)
            );
        }
        let mut huge = b"HTTP/1.1 200 OK\r\nX-Pad: ".to_vec();
        huge.resize(MAX_HEAD_BYTES + 10, b'a');
        let e = parse_pieces(&[&huge[..1000], &huge[1000..]], false).unwrap_err();
        assert!(e.contains("larger than"), "{e}");
    }

    #[test]
    fn requests_are_built_once_with_defaults() {
        let spec = RequestSpec {
            method: "POST",
            host_header: "127.0.0.1:8080",
            path: "/x",
            headers: &["X-A: 1".into()],
            body: b"abc",
            close: true,
        };
        let r = String::from_utf8(build_request(&spec).unwrap()).unwrap();
        assert_eq!(r, "POST /x HTTP/1.1\r\nX-A: 1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc");
        let spec = RequestSpec {
            method: "GET",
            host_header: "h",
            path: "/",
            headers: &["host: other".into()],
            body: b"",
            close: false,
        };
        assert_eq!(
            build_request(&spec).unwrap(),
            b"GET / HTTP/1.1\r\nhost: other\r\n\r\n"
        );
        for bad in ["NoColon", ": empty", "X-Bad\r\nInjected: 1"] {
            let spec = RequestSpec {
                method: "GET",
                host_header: "h",
                path: "/",
                headers: &[bad.into()],
                body: b"",
                close: false,
            };
            assert!(build_request(&spec).is_err(), "{bad:?} accepted");
        }
        let spec = RequestSpec {
            method: "G ET",
            host_header: "h",
            path: "/",
            headers: &[],
            body: b"",
            close: false,
        };
        assert!(build_request(&spec).unwrap_err().contains("--method"));
    }

    #[test]
    fn expectations() {
        let r = Response {
            status: 200,
            body_len: 5,
            body_sha256: Some(digest(b"hello")),
            keep_alive: true,
        };
        assert!(matches!(Expectation::default().judge(&r), Verdict::Ok));
        assert!(matches!(
            Expectation::default().judge(&Response {
                status: 404,
                ..r.clone()
            }),
            Verdict::Status
        ));
        assert!(matches!(
            Expectation {
                status: Some(201),
                ..Default::default()
            }
            .judge(&r),
            Verdict::Status
        ));
        assert!(matches!(
            Expectation {
                body_size: Some(4),
                ..Default::default()
            }
            .judge(&r),
            Verdict::Mismatch(_)
        ));
        assert!(matches!(
            Expectation {
                body_sha256: Some(digest(b"hellO")),
                ..Default::default()
            }
            .judge(&r),
            Verdict::Mismatch(_)
        ));
        assert!(matches!(
            Expectation {
                body_sha256: Some(digest(b"hello")),
                body_size: Some(5),
                status: Some(200)
            }
            .judge(&r),
            Verdict::Ok
        ));
        assert_eq!(parse_sha256_hex(&hex(&digest(b"x"))).unwrap(), digest(b"x"));
        assert!(parse_sha256_hex("abc").is_err());
    }

    /// splitmix64: a fixed seed gives the same corpus on every run and machine.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    /// Valid and invalid responses the mutations start from.
    fn seeds() -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = vec![
            STREAM.to_vec(),
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_vec(),
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=\"b\"\r\nhello\r\n0\r\nT: 1\r\n\r\n".to_vec(),
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabcdef".to_vec(),
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n".to_vec(),
            b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n".to_vec(),
            b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 304 Not Modified\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_vec(),
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nokHTTP/1.0 404 NF\r\n\r\nrest".to_vec(),
            b"HTTP/1.1 200 OK\nContent-Length: 1\n\nxHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\n\n".to_vec(),
        ];
        for bad in [
            &b"HTTP/1.1 2x0 OK\r\n\r\n"[..],
            b"SSH-2.0-OpenSSH\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n",
        ] {
            v.push(bad.to_vec());
        }
        v
    }

    /// Bytes that mean something to the framing, for single-byte substitutions.
    const FRAMING_BYTES: &[u8] = b"\r\n:;0123456789aAfF \t,-";
    /// Framing-relevant fragments the mutations insert.
    const TOKENS: &[&[u8]] = &[
        b"\r\n",
        b"\n",
        b"\r",
        b"chunked",
        b", chunked",
        b"Content-Length: 3\r\n",
        b"Transfer-Encoding: chunked\r\n",
        b"Transfer-Encoding: gzip\r\n",
        b"Connection: close\r\n",
        b"0\r\n\r\n",
        b"ffffffff\r\n",
        b";ext",
        b"HTTP/1.1 200 OK\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\n",
    ];

    fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
        let mut d = seeds[rng.below(seeds.len())].clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(d.len() + 1);
            let last = d.len().saturating_sub(1);
            match rng.below(7) {
                0 if !d.is_empty() => d[at.min(last)] = rng.next() as u8,
                1 if !d.is_empty() => {
                    d[at.min(last)] = FRAMING_BYTES[rng.below(FRAMING_BYTES.len())]
                }
                2 => {
                    let t = TOKENS[rng.below(TOKENS.len())];
                    d.splice(at..at, t.iter().copied());
                }
                3 => {
                    let end = (at + 1 + rng.below(8)).min(d.len());
                    d.drain(at.min(end)..end);
                }
                4 => {
                    let end = (at + 1 + rng.below(32)).min(d.len());
                    let dup = d[at.min(end)..end].to_vec();
                    d.splice(at..at, dup);
                }
                5 => d.truncate(at),
                _ => {
                    let other = &seeds[rng.below(seeds.len())];
                    d.truncate(at);
                    d.extend_from_slice(&other[rng.below(other.len() + 1)..]);
                }
            }
        }
        d
    }

    /// The fuzz target's property (`fuzzing`) on a few thousand mutated responses, at every cut
    /// point, one byte at a time, and at random triples of cuts.
    #[test]
    fn seeded_corpus_parses_the_same_however_it_is_cut() {
        let seeds = seeds();
        let mut rng = Rng(0x6e65_7461_7265_6e61);
        let (mut ok, mut err) = (0, 0);
        for _ in 0..3000 {
            let d = mutate(&mut rng, &seeds);
            for at in 0..=d.len() {
                fuzzing::check_cuts(&d, &[at]).unwrap();
            }
            let bytes: Vec<usize> = (1..d.len()).collect();
            fuzzing::check_cuts(&d, &bytes).unwrap();
            let mut three = [
                rng.below(d.len() + 1),
                rng.below(d.len() + 1),
                rng.below(d.len() + 1),
            ];
            three.sort();
            fuzzing::check_cuts(&d, &three).unwrap();
            fuzzing::check_fuzz_input(&d).unwrap();
            match parse_pieces(&[&d], true) {
                Ok(_) => ok += 1,
                Err(_) => err += 1,
            }
        }
        // Both outcomes must be common, or the corpus checks only one side of the property.
        assert!(ok > 500 && err > 500, "ok {ok}, err {err}");
    }

    /// A head over MAX_HEAD_BYTES is an error however it is read: in one piece or cut anywhere.
    #[test]
    fn oversized_head_is_an_error_whatever_the_reads() {
        let mut big = b"HTTP/1.1 200 OK\r\nX-Pad: ".to_vec();
        big.resize(MAX_HEAD_BYTES + 10, b'a');
        big.extend_from_slice(b"\r\nContent-Length: 0\r\n\r\n");
        assert!(parse_pieces(&[&big], false).is_err());
        for at in [
            1,
            1000,
            MAX_HEAD_BYTES - 1,
            MAX_HEAD_BYTES,
            MAX_HEAD_BYTES + 1,
            big.len() - 1,
        ] {
            fuzzing::check_cuts(&big, &[at]).unwrap();
        }
        // Exactly at the limit is still accepted.
        let mut edge = b"HTTP/1.1 200 OK\r\nX-Pad: ".to_vec();
        let tail = b"\r\nContent-Length: 0\r\n\r\n";
        edge.resize(MAX_HEAD_BYTES - tail.len(), b'a');
        edge.extend_from_slice(tail);
        assert_eq!(edge.len(), MAX_HEAD_BYTES);
        assert_eq!(parse_pieces(&[&edge], false).unwrap().len(), 1);
        fuzzing::check_cuts(&edge, &[MAX_HEAD_BYTES / 2]).unwrap();
    }

    /// RFC 9112 §6.3 framing when Transfer-Encoding is present.
    #[test]
    fn transfer_encoding_framing() {
        let one = |wire: &[u8]| {
            let got = parse_pieces(&[wire], false).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(got.len(), 1, "{got:?}");
            (got[0].body_len, got[0].keep_alive)
        };
        // A final coding other than chunked: the body runs until the close, whatever
        // Content-Length says, and the connection cannot be reused.
        assert_eq!(
            one(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n0123456789"),
            (10, false)
        );
        assert_eq!(
            one(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\n0123456789"),
            (10, false)
        );
        assert_eq!(
            one(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            ),
            (13, false)
        );
        // Chunked final: chunked, and Content-Length (either order) is ignored.
        assert_eq!(
            one(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
            (3, true)
        );
        // Several lines are one list: the last coding of the last non-empty line decides.
        assert_eq!(
            one(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
            (3, true)
        );
        assert_eq!(
            one(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\nabcd"),
            (4, false)
        );
        assert_eq!(
            one(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: ,\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
            (3, true)
        );
        // A Transfer-Encoding that names no coding at all is not a framing we can trust.
        assert!(parse_pieces(
            &[b"HTTP/1.1 200 OK\r\nTransfer-Encoding: \r\nContent-Length: 2\r\n\r\nab"],
            false
        )
        .is_err());
    }
}
