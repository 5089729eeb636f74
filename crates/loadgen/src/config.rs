//! From parsed arguments to a validated run description: defaults applied, cross-option rules
//! checked, the target resolved under the loopback rule. Every error names the option and the fix.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

pub use crate::cli::IoBackend;
use crate::cli::{Cli, Command, CommonArgs};
use crate::http::{self, Expectation};
use crate::parse::{parse_cpu_list, parse_ip_list};
use crate::target::{self, HttpUrl};

pub const DEFAULT_HTTP_CONNECTIONS: usize = 100;
pub const DEFAULT_ECHO_CONNECTIONS: usize = 1;
pub const DEFAULT_HTTP_DURATION: Duration = Duration::from_secs(10);
/// `--requests N` without `--duration` still stops by itself: a server that never answers must not
/// hold the generator forever. A run cut short by this bound says so on stderr and its result shows
/// `totals.responses` < `config.requests`; pass `-d` for longer runs.
pub const REQUESTS_MODE_TIME_BOUND: Duration = Duration::from_secs(60);
pub const DEFAULT_ECHO_BYTES: u64 = 32 * 1024;
pub const MAX_THREADS: usize = 1024;
pub const MAX_PIPELINE: usize = 1024;
/// `--coalesce-us` beyond this would distort latencies more than any saving is worth.
pub const MAX_COALESCE_US: u32 = 10_000;

pub struct HttpConfig {
    pub url: HttpUrl,
    pub requests: Option<u64>,
    pub close: bool,
    pub pipeline: usize,
    pub method: String,
    pub headers: Vec<String>,
    pub body_bytes: usize,
    pub expect: Expectation,
    pub verify_learn: bool,
    /// One request's wire bytes.
    pub request: Vec<u8>,
}

pub struct EchoConfig {
    /// None in `--duration` mode.
    pub bytes_per_connection: Option<u64>,
    pub chunk_bytes: u64,
    pub probe_interval: Option<Duration>,
}

#[allow(clippy::large_enum_variant)] // one per run
pub enum Mode {
    Http(HttpConfig),
    Echo(EchoConfig),
}

pub struct Config {
    pub mode: Mode,
    /// The target as given (URL or HOST:PORT).
    pub target: String,
    pub target_addr: SocketAddr,
    pub connections: usize,
    pub threads: usize,
    pub cpus: Vec<usize>,
    /// None: until `--requests` are done (http) or every connection sent its bytes (echo).
    pub duration: Option<Duration>,
    pub warmup: Duration,
    pub timeout: Duration,
    pub source_ips: Vec<IpAddr>,
    /// `--io`: the epoll engine or the io_uring one (http only).
    pub io: IoBackend,
    /// `--coalesce-us`: how long the uring engine may wait for more completions (0: none).
    pub coalesce_us: u32,
    pub json: bool,
    pub command_line: Vec<String>,
}

impl Config {
    pub fn mode_name(&self) -> &'static str {
        match self.mode {
            Mode::Http(_) => "http",
            Mode::Echo(_) => "echo",
        }
    }
}

pub fn from_cli(cli: Cli, command_line: Vec<String>) -> Result<Config, String> {
    match cli.command {
        Command::Http(a) => {
            let url = target::parse_http_url(&a.url)?;
            let addrs = target::resolve(&url.host, url.port, &a.common.allow_target)?;
            let mut c = common(
                &a.common,
                DEFAULT_HTTP_CONNECTIONS,
                addrs[0],
                a.url.clone(),
                command_line,
            )?;
            if a.pipeline == 0 || a.pipeline > MAX_PIPELINE {
                return Err(format!(
                    "--pipeline {} is out of range: use 1 to {MAX_PIPELINE}",
                    a.pipeline
                ));
            }
            if a.close && a.pipeline > 1 {
                return Err("--close sends one request per connection, so it cannot be combined with --pipeline > 1".into());
            }
            if a.common.io == IoBackend::Uring {
                crate::uring::probe(a.common.coalesce_us)?;
            }
            if a.requests == Some(0) {
                return Err("--requests 0 would send nothing: give at least 1".into());
            }
            if a.verify_learn
                && (a.expect_status.is_some()
                    || a.expect_body_size.is_some()
                    || a.expect_body_sha256.is_some())
            {
                return Err("--verify-learn learns status, body size and digest from the first response: drop the --expect-* options or --verify-learn".into());
            }
            c.duration = match (c.duration, a.requests) {
                (Some(d), _) => Some(d),
                (None, Some(_)) => Some(REQUESTS_MODE_TIME_BOUND),
                (None, None) => Some(DEFAULT_HTTP_DURATION),
            };
            let body = match (&a.body, &a.body_file) {
                (Some(s), _) => s.clone().into_bytes(),
                (None, Some(p)) => {
                    std::fs::read(p).map_err(|e| format!("--body-file {}: {e}", p.display()))?
                }
                (None, None) => Vec::new(),
            };
            let expect = Expectation {
                status: a.expect_status,
                body_size: a.expect_body_size,
                body_sha256: a
                    .expect_body_sha256
                    .as_deref()
                    .map(http::parse_sha256_hex)
                    .transpose()?,
            };
            let request = http::build_request(&http::RequestSpec {
                method: &a.method,
                host_header: &url.host_header,
                path: &url.path,
                headers: &a.headers,
                body: &body,
                close: a.close,
            })?;
            c.mode = Mode::Http(HttpConfig {
                url,
                requests: a.requests,
                close: a.close,
                pipeline: a.pipeline,
                method: a.method,
                headers: a.headers,
                body_bytes: body.len(),
                expect,
                verify_learn: a.verify_learn,
                request,
            });
            Ok(c)
        }
        Command::Echo(a) => {
            let (host, port) = target::split_host_port(&a.target, None)
                .map_err(|e| format!("echo target '{}': {e}", a.target))?;
            let addrs = target::resolve(&host, port, &a.common.allow_target)?;
            let c = common(
                &a.common,
                DEFAULT_ECHO_CONNECTIONS,
                addrs[0],
                a.target.clone(),
                command_line,
            )?;
            if a.common.io == IoBackend::Uring {
                return Err(
                    "--io uring is not implemented for echo yet; use --io epoll (the default)"
                        .into(),
                );
            }
            if a.chunk == 0 {
                return Err("--chunk 0: a chunk must be at least 1 byte".into());
            }
            let bytes_per_connection = match (a.bytes, c.duration) {
                (Some(_), Some(_)) => {
                    return Err("echo takes either --bytes (each connection sends that much, then the run ends) or --duration (flood until time is up), not both".into())
                }
                (Some(0), None) => return Err("--bytes 0 would send nothing: give at least 1".into()),
                (Some(b), None) => Some(b),
                (None, Some(_)) => None,
                (None, None) => Some(DEFAULT_ECHO_BYTES),
            };
            if bytes_per_connection.is_some() && !c.warmup.is_zero() {
                return Err("--warmup needs --duration in echo mode: with --bytes every connection's bytes are the measurement".into());
            }
            if a.probe_interval.is_some_and(|i| i.is_zero()) {
                return Err("--probe-interval must be longer than 0".into());
            }
            Ok(Config {
                mode: Mode::Echo(EchoConfig {
                    bytes_per_connection,
                    chunk_bytes: a.chunk,
                    probe_interval: a.probe_interval,
                }),
                ..c
            })
        }
    }
}

fn common(
    a: &CommonArgs,
    default_connections: usize,
    target_addr: SocketAddr,
    target: String,
    command_line: Vec<String>,
) -> Result<Config, String> {
    let connections = a.connections.unwrap_or(default_connections);
    if connections == 0 {
        return Err("--connections 0: give at least 1".into());
    }
    if a.threads == 0 || a.threads > MAX_THREADS {
        return Err(format!(
            "--threads {} is out of range: use 1 to {MAX_THREADS}",
            a.threads
        ));
    }
    if a.threads > connections {
        return Err(format!("--threads {} is more than --connections {connections}: every thread needs at least one connection", a.threads));
    }
    let cpus = match &a.cpus {
        None => Vec::new(),
        Some(text) => {
            let cpus = parse_cpu_list(text).map_err(|e| format!("--cpus: {e}"))?;
            let allowed = crate::sys::allowed_cpus();
            if let Some(bad) = cpus.iter().find(|c| !allowed.contains(c)) {
                return Err(format!(
                    "--cpus: CPU {bad} is not available to this process (allowed: {allowed:?})"
                ));
            }
            cpus
        }
    };
    if a.duration.is_some_and(|d| d.is_zero()) {
        return Err("--duration must be longer than 0".into());
    }
    if a.coalesce_us > 0 && a.io != IoBackend::Uring {
        return Err("--coalesce-us only applies to --io uring (epoll reacts to every readiness event at once)".into());
    }
    if a.coalesce_us > MAX_COALESCE_US {
        return Err(format!("--coalesce-us {} is too long: use 0 to {MAX_COALESCE_US}; it adds up to that much to measured latencies", a.coalesce_us));
    }
    if a.timeout.is_zero() {
        return Err("--timeout must be longer than 0".into());
    }
    let source_ips = match &a.source_ips {
        None => Vec::new(),
        Some(text) => {
            let ips = parse_ip_list(text).map_err(|e| format!("--source-ips: {e}"))?;
            for ip in &ips {
                if ip.is_ipv4() != target_addr.is_ipv4() {
                    return Err(format!(
                        "--source-ips: {ip} is not of the same address family as the target {}",
                        target_addr.ip()
                    ));
                }
                check_bindable(*ip)?;
            }
            ips
        }
    };
    Ok(Config {
        mode: Mode::Echo(EchoConfig {
            bytes_per_connection: None,
            chunk_bytes: 0,
            probe_interval: None,
        }),
        target,
        target_addr,
        connections,
        threads: a.threads,
        cpus,
        duration: a.duration,
        warmup: a.warmup.unwrap_or(Duration::ZERO),
        timeout: a.timeout,
        source_ips,
        io: a.io,
        coalesce_us: a.coalesce_us,
        json: a.json,
        command_line,
    })
}

/// A source address must be local, or every connect would fail with EADDRNOTAVAIL.
fn check_bindable(ip: IpAddr) -> Result<(), String> {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(SocketAddr::new(ip, 0)),
        socket2::Type::STREAM,
        None,
    )
    .map_err(|e| format!("--source-ips: cannot create a socket: {e}"))?;
    sock.bind(&SocketAddr::new(ip, 0).into())
        .map_err(|e| format!("--source-ips: cannot bind to {ip} ({e}); every address must be assigned to this machine (all of 127.0.0.0/8 is)"))
}
