//! A netarena contestant written by `netarena new`: the standard library only, so it builds in seconds.
//!
//! Every route of the scenario catalog (docs/scenarios.md) but static is here; the manifest lists the ones it
//! claims. What verification holds every server to: HTTP/1.1 keep-alive, 127.0.0.1 only, a listen backlog of
//! at least 1024, TCP_NODELAY, and the exact bodies below. Replace it with your framework's server and keep
//! those.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::thread;
use std::time::Duration;

const BACKLOG: i32 = 4096;

extern "C" {
    // std's TcpListener listens with a backlog of 128; listen() again raises it (Linux allows that).
    fn listen(fd: i32, backlog: i32) -> i32;
}

fn reply(out: &mut TcpStream, content_type: &str, body: &[u8]) -> std::io::Result<()> {
    let mut response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    response.extend_from_slice(body);
    out.write_all(&response)
}

fn not_found(out: &mut TcpStream) -> std::io::Result<()> {
    out.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
}

fn serve_http(stream: TcpStream) -> std::io::Result<()> {
    let mut out = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line)? == 0 {
            return Ok(()); // the client closed the connection
        }
        let mut content_length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header)? == 0 {
                return Ok(());
            }
            if header == "\r\n" || header == "\n" {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    content_length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; content_length];
        reader.read_exact(&mut body)?; // a request body is read and ignored
        let path = request_line.split_whitespace().nth(1).unwrap_or("/");
        let path = path.split('?').next().unwrap_or(path);
        if path == "/hello" {
            reply(&mut out, "text/plain", b"Hello, World!")?;
        } else if path == "/json" {
            reply(&mut out, "application/json", br#"{"message":"Hello, World!"}"#)?;
        } else if let Some(Ok(n)) = path.strip_prefix("/bytes/").map(str::parse::<usize>) {
            // Built per request here; the catalog asks for one body per size (cache it when you measure bytes).
            reply(&mut out, "application/octet-stream", &vec![b'*'; n])?;
        } else if let Some(Ok(ms)) = path.strip_prefix("/sleep/").map(str::parse::<u64>) {
            thread::sleep(Duration::from_millis(ms)); // blocks this connection's thread only
            reply(&mut out, "text/plain", format!("slept {ms}").as_bytes())?;
        } else {
            not_found(&mut out)?;
        }
    }
}

fn serve_echo(mut stream: TcpStream) -> std::io::Result<()> {
    let mut buffer = vec![0u8; 65536];
    loop {
        let n = stream.read(&mut buffer)?;
        if n == 0 {
            return Ok(());
        }
        stream.write_all(&buffer[..n])?;
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port = args
        .iter()
        .position(|a| a == "--port")
        .and_then(|i| args.get(i + 1))
        .expect("--port PORT")
        .clone();
    let echo = args.iter().any(|a| a == "--echo");
    let listener = TcpListener::bind(format!("127.0.0.1:{port}")).expect("bind");
    unsafe { listen(listener.as_raw_fd(), BACKLOG) };
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let _ = stream.set_nodelay(true);
        thread::spawn(move || if echo { serve_echo(stream) } else { serve_http(stream) });
    }
}
