//! The one HTTP test server: thread-per-connection on std::net, so a test's handler is plain
//! blocking code and each misbehaviour (split writes, RST, FIN at a chosen byte, a stall) is exact
//! and obvious. Servers that answer correctly are a one-line handler on top (`fixed_http_server`).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::{is_poll_timeout, loopback_listener, ConnCtx, Stats, TestServer};

pub const HELLO: &[u8] = b"Hello, World!";

pub fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub target: String,
    pub version: String,
    /// Names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// How many requests came before this one on the same connection.
    pub index_on_connection: u64,
    /// Another complete request arrived with this one (pipelining) and waits behind it.
    pub more_buffered: bool,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the connection does after a handler ran.
pub enum After {
    /// Keep the connection for the next request.
    KeepAlive,
    /// Half-close (FIN), then wait for the client to close.
    Close,
    /// Send nothing more, wait for the client to give up and close.
    Hold,
    /// The handler already disposed of the socket (e.g. reset it).
    Gone,
    /// Keep the connection and send these bytes, in one write with the replies to the requests
    /// already read behind this one (pipelining), as an event-driven server does. A server's
    /// handler replies this way to every request or to none: bytes it wrote itself would overtake
    /// the queued ones.
    Reply(Vec<u8>),
}

/// `handler(global_request_number, request, stream, stats) -> After`; request numbers count from 0
/// over the whole server in the order requests are read.
pub fn http_server<H>(listener: TcpListener, max_accepts: Option<u64>, handler: H) -> TestServer
where
    H: Fn(u64, &Request, &mut TcpStream, &Stats) -> io::Result<After> + Send + Sync + 'static,
{
    let counter = Arc::new(AtomicU64::new(0));
    let handler = Arc::new(handler);
    TestServer::start(listener, max_accepts, move |mut stream, conn_index, ctx| {
        let mut buf: Vec<u8> = Vec::with_capacity(8192);
        // `After::Reply` bytes not sent yet: they wait for the last request of a pipelined batch.
        let mut replies: Vec<u8> = Vec::new();
        let mut on_conn = 0u64;
        loop {
            let req = match read_request(&mut stream, &mut buf, ctx, on_conn) {
                Some(r) => r,
                None => return,
            };
            on_conn += 1;
            ctx.stats.per_connection.lock().unwrap()[conn_index as usize] += 1;
            ctx.stats.requests.fetch_add(1, Ordering::SeqCst);
            {
                let mut first = ctx.stats.first_requests.lock().unwrap();
                if first.len() < 64 {
                    first.push(req.clone());
                }
            }
            let n = counter.fetch_add(1, Ordering::SeqCst);
            match handler(n, &req, &mut stream, &ctx.stats) {
                Ok(After::KeepAlive) => {}
                Ok(After::Reply(bytes)) => {
                    replies.extend_from_slice(&bytes);
                    if !req.more_buffered {
                        if stream.write_all(&replies).is_err() {
                            return;
                        }
                        replies.clear();
                    }
                }
                Ok(After::Close) => {
                    let _ = stream.shutdown(Shutdown::Write);
                    ctx.hold_until_peer_closes(&mut stream);
                    return;
                }
                Ok(After::Hold) => {
                    ctx.hold_until_peer_closes(&mut stream);
                    return;
                }
                Ok(After::Gone) | Err(_) => return,
            }
        }
    })
}

/// Reads one request (headers plus a Content-Length body). None when the peer closed or the server
/// is stopping.
fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    ctx: &ConnCtx,
    on_conn: u64,
) -> Option<Request> {
    let mut chunk = [0u8; 8192];
    loop {
        if let Some((mut req, len)) = parse_front(buf, on_conn) {
            buf.drain(..len);
            req.more_buffered = parse_front(buf, on_conn + 1).is_some();
            return Some(req);
        }
        if ctx.should_stop() {
            return None;
        }
        match stream.read(&mut chunk) {
            Ok(0) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if is_poll_timeout(&e) => {}
            Err(_) => return None,
        }
    }
}

/// The request at the front of `buf` and its length in bytes, once all of it has arrived; `buf`
/// is left as it is.
fn parse_front(buf: &[u8], on_conn: u64) -> Option<(Request, usize)> {
    let head_end = find(buf, b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut start = lines.next().unwrap_or("").split(' ');
    let method = start.next().unwrap_or("").to_string();
    let target = start.next().unwrap_or("").to_string();
    let version = start.next().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let body_len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let total = head_end + 4 + body_len;
    if buf.len() < total {
        return None;
    }
    let request = Request {
        method,
        target,
        version,
        headers,
        body: buf[head_end + 4..total].to_vec(),
        index_on_connection: on_conn,
        more_buffered: false,
    };
    Some((request, total))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A complete `Content-Length` response in one write.
pub fn write_response(
    stream: &mut TcpStream,
    status: u16,
    reason: &str,
    body: &[u8],
) -> io::Result<()> {
    stream.write_all(&response_bytes(status, reason, body))
}

fn response_bytes(status: u16, reason: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// Correct `200 Hello, World!` and counts it as good.
pub fn write_hello(stream: &mut TcpStream, stats: &Stats) -> io::Result<After> {
    write_response(stream, 200, "OK", HELLO)?;
    stats.good.fetch_add(1, Ordering::SeqCst);
    Ok(After::KeepAlive)
}

/// A server that answers every request correctly, one write per response.
pub fn hello_server() -> TestServer {
    http_server(loopback_listener(), None, |_, _, s, stats| {
        write_hello(s, stats)
    })
}

/// A server that answers every request with `status` and `body`, keep-alive, and counts each
/// answer as good (it is what the test asked for, a 503 included).
///
/// Unlike `hello_server`, it answers a pipelined batch in one write (`After::Reply`), as the
/// event-driven servers the benchmark measures do: generator_starved needs a server that keeps a
/// `--pipeline 8` generator busy on a loaded 2-core machine, and with a write per response its
/// generator was left waiting for answers (busy under the saturation bar) in 5 runs of 6.
pub fn fixed_http_server(status: u16, body: &'static [u8]) -> TestServer {
    let response = response_bytes(status, reason_phrase(status), body);
    http_server(loopback_listener(), None, move |_, _, _, stats| {
        stats.good.fetch_add(1, Ordering::SeqCst);
        Ok(After::Reply(response.clone()))
    })
}

/// The generator ignores the reason phrase; a real one only keeps the responses readable in a
/// packet capture.
fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        404 => "Not Found",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Writes `pieces` one by one with `gap` between them, so the client's reads see arbitrary splits.
pub fn write_split(stream: &mut TcpStream, pieces: &[&[u8]], gap: Duration) -> io::Result<()> {
    for (i, p) in pieces.iter().enumerate() {
        if i > 0 {
            thread::sleep(gap);
        }
        stream.write_all(p)?;
        stream.flush()?;
    }
    Ok(())
}
