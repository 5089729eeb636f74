//! From parsed arguments to a validated run description: defaults applied, cross-option rules
//! checked, the target resolved under the loopback rule. Every error names the option and the fix.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::cli::{ArrivalArg, Cli, Command, CommonArgs, HttpArgs, UrlOrderArg};
pub use crate::cli::{Coalesce, IoBackend, IoChoice};
use crate::http::urls::{Requests, UrlOrder};
use crate::http::{self, Expectation};
use crate::parse::{parse_cpu_list, parse_ip_list};
use crate::sweep::{self, Slo};
use crate::target::{self, HttpUrl};
use crate::threshold::{self, Threshold};

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
    /// `--urls`: every URL's request, built once (the single URL's otherwise).
    pub requests_wire: std::sync::Arc<Requests>,
    pub urls_file: Option<std::path::PathBuf>,
    /// Poisson gaps and random URL picks; from the clock unless `--seed`.
    pub seed: u64,
    pub open: Option<OpenConfig>,
    /// `https://`: the TLS client settings every connection starts its session with.
    pub tls: Option<crate::tls::TlsSettings>,
    /// `--h2`: every connection speaks HTTP/2, with these requests (None: HTTP/1.1).
    pub h2: Option<std::sync::Arc<crate::http2::H2Requests>>,
}

impl HttpConfig {
    /// `--verify-learn`: the learned response becomes what every response must be. Both loops judge
    /// by `requests_wire` (learning excludes `--urls`, so it has the one entry of the positional URL).
    pub fn set_learned(&mut self, expect: Expectation) {
        let requests = std::sync::Arc::get_mut(&mut self.requests_wire)
            .expect("the request list is shared only once the load threads start");
        requests.expect = vec![expect.clone()];
        self.expect = expect;
    }
}

/// `--arrival`: how the open loop spaces its arrivals (`load::schedule` times them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    Uniform,
    Poisson,
}

impl Arrival {
    pub fn name(self) -> &'static str {
        match self {
            Arrival::Uniform => "uniform",
            Arrival::Poisson => "poisson",
        }
    }
}

/// `--rate` / `--conn-rate` and what goes with them.
pub struct OpenConfig {
    pub kind: LoadKind,
    pub rate: Option<f64>,
    pub conn_rate: Option<f64>,
    pub arrival: Arrival,
    pub steps: Option<Vec<f64>>,
    pub step_duration: Option<Duration>,
    /// `--conns-per-step N`: each step (or the single rate) opens exactly N connections and lasts
    /// N / rate; None: steps of `step_duration`, a single rate for `--duration`.
    pub conns_per_step: Option<u64>,
    pub find_max: Option<FindMax>,
    /// `--spin-us`: how long before an intended send the thread stops sleeping and busy-polls.
    pub spin: SpinWindow,
}

/// `--spin-us`: a window given by the user, or `auto`: each load thread measures its timer's wake-up
/// lag and widens the window where that lag is a large part of the time between its sends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SpinWindow {
    Fixed(Duration),
    Auto,
}

/// `--spin-us auto`: the timer is too coarse for a rate when its wake-up lag p99 exceeds this share
/// of the time between a thread's sends (sends would land a large part of a gap late, and late sends
/// bunch up with the next ones). Below it the default window is kept: the lag is the timer's, small
/// beside the gaps, and nothing is worth a spinning core.
pub const AUTO_SPIN_LAG_SHARE: f64 = 0.25;
/// `--spin-us auto` widens the window to this many times the measured lag p99: the p99 itself
/// leaves one wake-up in a hundred late, and twice it covers the tail seen in practice.
pub const AUTO_SPIN_LAG_FACTOR: u32 = 2;

impl SpinWindow {
    /// The window for one thread sending `rate_per_s`, given its timer's measured wake-up lag p99
    /// (`auto` only; None for a fixed window). Returns the window and whether `auto` widened it.
    pub fn window(self, timer_lag_p99: Option<Duration>, rate_per_s: f64) -> (Duration, bool) {
        let default = Duration::from_micros(DEFAULT_SPIN_US);
        match (self, timer_lag_p99) {
            (SpinWindow::Fixed(d), _) => (d, false),
            (SpinWindow::Auto, None) => (default, false),
            (SpinWindow::Auto, Some(lag)) => {
                let gap_s = if rate_per_s > 0.0 {
                    1.0 / rate_per_s
                } else {
                    f64::INFINITY
                };
                if lag.as_secs_f64() > AUTO_SPIN_LAG_SHARE * gap_s {
                    let wide = (lag * AUTO_SPIN_LAG_FACTOR)
                        .max(default)
                        .min(Duration::from_micros(MAX_SPIN_US));
                    (wide, wide > default)
                } else {
                    (default, false)
                }
            }
        }
    }
}

impl OpenConfig {
    /// The asked rate (requests or connections per second) of a single-rate run, or the first
    /// rate of a sweep.
    pub fn base_rate(&self) -> f64 {
        self.rate
            .or(self.conn_rate)
            .expect("an open loop has --rate or --conn-rate (open_config refuses it otherwise)")
    }
}

pub struct FindMax {
    pub slo: Slo,
    pub max_errors: f64,
    pub resolution: f64,
    pub limit: f64,
}

/// `--conn-rate` without `-c`: how many connections may be open at once before arrivals are
/// dropped (and counted); well inside the 20000 open files this machine allows.
pub const DEFAULT_CONN_RATE_MAX_OPEN: usize = 10_000;
pub const DEFAULT_STEP_DURATION: Duration = Duration::from_secs(5);
pub const DEFAULT_FIND_MAX_RESOLUTION: f64 = 0.05;
pub const DEFAULT_FIND_MAX_LIMIT: f64 = 1_000_000.0;
/// `--find-max` measures at most this many steps.
pub const FIND_MAX_MAX_STEPS: usize = 40;
pub const DEFAULT_MAX_ERRORS: f64 = 0.001;
/// `--spin-us` default: below this a sleep/wake round trip costs about as much as it would wait, so
/// polling without sleeping adds no lag and almost no CPU.
pub const DEFAULT_SPIN_US: u64 = 20;
/// `--spin-us` beyond this is refused: no timer on a working machine wakes that late at p99, so a
/// longer window would only burn CPU.
pub const MAX_SPIN_US: u64 = 10_000;
/// A rate above this is refused: far beyond what one generator process can schedule.
pub const MAX_RATE: f64 = 10_000_000.0;

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
    /// The engine that runs: `--io` resolved (`resolve_io`).
    pub io: IoBackend,
    /// Whether and how long the uring engine may wait for more completions.
    pub coalesce: Coalesce,
    /// `--io` as asked (auto, epoll, uring) and why `io`/`coalesce` are what they are.
    pub io_requested: IoChoice,
    pub io_reason: String,
    pub json: bool,
    /// `--prepare`: wait for a start time on stdin (the barrier of several generators started together).
    pub prepare: bool,
    pub command_line: Vec<String>,
    pub interval: Duration,
    pub hlog: Option<std::path::PathBuf>,
    /// `--threshold`: judged on the finished result (exit 99 when one fails).
    pub thresholds: Vec<Threshold>,
    /// `--quiet`: no progress lines.
    pub quiet: bool,
}

impl Config {
    pub fn mode_name(&self) -> &'static str {
        match self.mode {
            Mode::Http(_) => "http",
            Mode::Echo(_) => "echo",
        }
    }

    /// The longest this run may take from its start to its result: the warm-up, every measured
    /// phase (a sweep's steps, the most steps a find-max search measures) and each phase's drain of
    /// up to `timeout`. None when time does not bound it: `--requests` without `--duration`, an echo
    /// flood of `--bytes` (whoever runs it bounds it). `check` reports it (`longest_s`), so a caller
    /// that must stop a stuck run knows when without knowing the load models.
    pub fn longest(&self) -> Option<Duration> {
        let drain = self.timeout;
        let open = match &self.mode {
            Mode::Http(h) => h.open.as_ref(),
            Mode::Echo(_) => None,
        };
        let measured = match open {
            Some(o) if o.find_max.is_some() => {
                let step = o.step_duration.unwrap_or(DEFAULT_STEP_DURATION);
                Some((step + drain) * FIND_MAX_MAX_STEPS as u32)
            }
            Some(o) if o.conns_per_step.is_some() || o.steps.is_some() => {
                let rates = o.steps.clone().unwrap_or_else(|| vec![o.base_rate()]);
                let step_length = |rate: f64| match o.conns_per_step {
                    Some(n) => Duration::from_secs_f64(n as f64 / rate),
                    None => o.step_duration.unwrap_or(DEFAULT_STEP_DURATION),
                };
                Some(rates.iter().map(|&rate| step_length(rate) + drain).sum())
            }
            _ => self.duration.map(|d| d + drain),
        };
        measured.map(|m| m + self.warmup)
    }
}

/// The open loop's load model.
#[derive(Clone, Copy, Debug)]
pub enum LoadKind {
    /// `--rate`: requests on a fixed pool of keep-alive connections.
    Rate,
    /// `--conn-rate`: each arrival is a new connection doing this many requests, then closing.
    ConnRate { requests_per_conn: u32 },
}

/// What this process can use of io_uring (`uring::ring::support`, probed once before anything is sent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IoSupport {
    /// Everything the engine needs, and min-wait (Linux 6.12+) for coalescing.
    Full,
    /// Everything the engine needs, but no min-wait: no coalescing window.
    NoMinWait,
    /// Not usable here: why (kernel, sysctl, seccomp, memory lock), in words for the user.
    Unavailable(String),
}

/// The validated configuration. `io_uring` probes what io_uring offers here; it is called only
/// when `--io` needs the answer (the probe is I/O, which this module does none of itself).
pub fn from_cli(
    cli: Cli,
    command_line: Vec<String>,
    io_uring: impl FnOnce() -> IoSupport,
) -> Result<Config, String> {
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
            if a.requests == Some(0) {
                return Err("--requests 0 would send nothing: give at least 1".into());
            }
            // --expect-status may come with --verify-learn: the learned response must have that status
            // (netarena's json scenario: status 200, and whatever serialization the framework chose).
            if a.verify_learn && (a.expect_body_size.is_some() || a.expect_body_sha256.is_some()) {
                return Err("--verify-learn learns the body size and digest from the first response: drop --expect-body-size/--expect-body-sha256 or --verify-learn".into());
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
                    .transpose()
                    .map_err(|e| format!("--expect-body-sha256: {e}"))?,
            };
            let spec = http::RequestSpec {
                method: &a.method,
                host_header: &url.host_header,
                path: &url.path,
                headers: &a.headers,
                body: &body,
                close: a.close,
            };
            let request = http::build_request(&spec)?;
            let seed = a.seed.unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64)
            });
            let open = open_config(&a, &mut c)?;
            let model = if open.is_some() {
                LoadModel::Open
            } else {
                LoadModel::Closed
            };
            let h2 = h2_settings(&a, &body)?;
            let tls = tls_settings(&a, &url, h2.is_some())?;
            // https and HTTP/2 run on either engine, chosen as for plain HTTP/1.1.
            (c.io, c.coalesce, c.io_reason) = resolve_io(&a.common, model, io_uring)?;
            let order = match a.url_order {
                UrlOrderArg::Random => UrlOrder::Random,
                UrlOrderArg::RoundRobin => UrlOrder::RoundRobin,
            };
            let requests_wire = match &a.urls {
                None => Requests::one(
                    request.clone(),
                    format!("{} {}", a.method, url.path),
                    url.path.clone(),
                    expect.clone(),
                    order,
                ),
                Some(path) => {
                    // The learning request fetches the positional URL only: its body would become
                    // the expectation for every file of the list, and every other file a
                    // verification_mismatch.
                    if a.verify_learn {
                        return Err(format!("--verify-learn learns one response (of {}) and would expect its body from every URL of --urls {}: drop --verify-learn, or check the status alone with --expect-status", url.path, path.display()));
                    }
                    if c.hlog.is_some() && c.hlog.as_ref() == Some(path) {
                        return Err("--hlog and --urls name the same file".into());
                    }
                    Requests::from_file(path, &url, &spec, &expect, order)?
                }
            };
            let h2 = h2.map(|settings| {
                std::sync::Arc::new(crate::http2::H2Requests {
                    settings,
                    blocks: requests_wire
                        .paths
                        .iter()
                        .map(|path| crate::http2::hpack::request_block(&spec, url.tls, path))
                        .collect(),
                    body: body.clone(),
                })
            });
            c.mode = Mode::Http(HttpConfig {
                requests_wire: std::sync::Arc::new(requests_wire),
                urls_file: a.urls.clone(),
                seed,
                open,
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
                tls,
                h2,
            });
            Ok(c)
        }
        Command::Completions { .. } => {
            Err("completions print a script and run nothing; main handles them first".into())
        }
        Command::Calibrate(_) => Err("calibrate runs no load; main handles it first".into()),
        Command::Check(_) => Err("check runs no load; main hands its run's arguments over".into()),
        Command::Merge(_) => Err("merge runs no load; main handles it first".into()),
        Command::Echo(a) => {
            let (host, port) = target::split_host_port(&a.target, None)
                .map_err(|e| format!("echo target '{}': {e}", a.target))?;
            let addrs = target::resolve(&host, port, &a.common.allow_target)?;
            let mut c = common(
                &a.common,
                DEFAULT_ECHO_CONNECTIONS,
                addrs[0],
                a.target.clone(),
                command_line,
            )?;
            (c.io, c.coalesce, c.io_reason) = resolve_io(&a.common, LoadModel::Echo, io_uring)?;
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

/// `--cacert`, `--insecure`, `--tls-resume` for an https:// URL; refused with an http:// one, where
/// they would silently do nothing.
fn tls_settings(
    a: &HttpArgs,
    url: &target::HttpUrl,
    h2: bool,
) -> Result<Option<crate::tls::TlsSettings>, String> {
    use crate::tls::{settings, Trust};
    if !url.tls {
        let given = [
            (a.cacert.is_some(), "--cacert"),
            (a.insecure, "--insecure"),
            (a.tls_resume, "--tls-resume"),
        ];
        if let Some((_, flag)) = given.iter().find(|(on, _)| *on) {
            return Err(format!(
                "{flag} applies to https:// URLs only, and '{}' is http://: drop {flag} or use https://",
                a.url
            ));
        }
        return Ok(None);
    }
    let trust = match (&a.cacert, a.insecure) {
        (Some(path), _) => Trust::CaFile(path),
        (None, true) => Trust::Anybody,
        (None, false) => {
            return Err(format!(
                "'{}' is https://: say whom to trust, --cacert FILE (the PEM certificate of the server's CA, or its self-signed one) or --insecure (any certificate); netarena-load does not read the system's roots",
                a.url
            ))
        }
    };
    settings(&url.host, trust, a.tls_resume, h2).map(Some)
}

/// `--h2`, `--streams`, `--h2-window`: the HTTP/2 settings, or None for HTTP/1.1. What HTTP/2 has no
/// use for, or what is not built for it yet, is refused naming the flag.
fn h2_settings(a: &HttpArgs, body: &[u8]) -> Result<Option<crate::http2::H2Settings>, String> {
    use crate::http2::{H2Settings, DEFAULT_WINDOW, MAX_REQUEST_BODY, MAX_STREAMS};
    if !a.h2 {
        for (given, flag) in [
            (a.streams.is_some(), "--streams"),
            (a.h2_window.is_some(), "--h2-window"),
        ] {
            if given {
                return Err(format!(
                    "{flag} applies to HTTP/2: add --h2, or drop {flag}"
                ));
            }
        }
        return Ok(None);
    }
    let streams = a.streams.unwrap_or(1);
    if streams == 0 || streams > MAX_STREAMS {
        return Err(format!(
            "--streams {streams} is out of range: use 1 to {MAX_STREAMS}"
        ));
    }
    let window = a.h2_window.unwrap_or(DEFAULT_WINDOW);
    if !(1..=crate::http2::frame::MAX_WINDOW).contains(&window) {
        return Err(format!(
            "--h2-window {window} is out of range: use 1 to 2147483647 (2^31-1)"
        ));
    }
    let refused = [
        (a.pipeline > 1, "--pipeline", "HTTP/2 has no pipelining; use --streams N for N requests in flight per connection"),
        (a.close, "--close", "one request per HTTP/2 connection is not built; drop --close"),
        (a.conn_rate.is_some() && streams > 1, "--conn-rate and --streams", "--conn-rate sends each connection's requests one after another, one stream at a time; drop --streams, or use --rate for streams side by side"),
    ];
    if let Some((_, flag, why)) = refused.iter().find(|(on, _, _)| *on) {
        return Err(format!("--h2 with {flag}: {why}"));
    }
    if body.len() > MAX_REQUEST_BODY {
        return Err(format!("--h2 sends a request body in one DATA frame, at most {MAX_REQUEST_BODY} bytes, and this body has {}: send a smaller one", body.len()));
    }
    Ok(Some(H2Settings { streams, window }))
}

/// Which load model `--io` is resolved for: each has its own reasons for its engine.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum LoadModel {
    /// The HTTP closed loop: io_uring with automatic coalescing where the kernel has min-wait.
    Closed,
    /// `--rate`, `--conn-rate`: auto keeps epoll (measured cheaper, see `resolve_io`); never coalesces.
    Open,
    /// The echo flood (`io::echo`, both engines).
    Echo,
}

impl LoadModel {
    /// Why this load model has no coalescing window on io_uring; None: it has one.
    fn no_coalescing(self) -> Option<&'static str> {
        match self {
            LoadModel::Closed => None,
            LoadModel::Open => Some("the open loop times every response against its schedule, and holding completions back would add to that latency"),
            LoadModel::Echo => Some("the echo flood reacts to every completion at once"),
        }
    }
}

/// `--io` resolved into the engine that runs, its coalescing and why, in words the result keeps.
/// An explicit `--io uring` the kernel cannot serve is an error; auto falls back to epoll and says why.
fn resolve_io(
    a: &CommonArgs,
    model: LoadModel,
    io_uring: impl FnOnce() -> IoSupport,
) -> Result<(IoBackend, Coalesce, String), String> {
    let asked = a.coalesce.unwrap_or(Coalesce::Off);
    let no_coalescing = model.no_coalescing();
    if let (Some(why), true) = (no_coalescing, a.coalesce.is_some()) {
        return Err(format!(
            "--coalesce-us applies to the HTTP closed loop only: {why}: drop --coalesce-us"
        ));
    }
    match a.io {
        IoChoice::Epoll => Ok((IoBackend::Epoll, Coalesce::Off, "--io epoll".into())),
        IoChoice::Uring => match io_uring() {
            IoSupport::Unavailable(why) => Err(format!(
                "--io uring: io_uring cannot be used here: {why}. Use --io epoll, which needs none of it"
            )),
            IoSupport::NoMinWait if asked != Coalesce::Off => Err(
                "--coalesce-us needs io_uring's min-wait (Linux 6.12+), which this kernel lacks: drop --coalesce-us".into(),
            ),
            _ => Ok((IoBackend::Uring, asked, "--io uring".into())),
        },
        // Measured on a quiet machine (bench/RESULTS.md, 2026-11-26): the open loop on io_uring
        // cost 28% more CPU and had a later schedule lag p99 than on epoll at the same spin window,
        // so auto keeps epoll for it; `--io uring` still runs it on io_uring.
        IoChoice::Auto if model == LoadModel::Open => Ok((
            IoBackend::Epoll,
            Coalesce::Off,
            "--io auto: the open loop (--rate, --conn-rate) runs on epoll, which measured cheaper and more punctual than io_uring for it (--io uring runs it there)".into(),
        )),
        IoChoice::Auto => Ok(match io_uring() {
            IoSupport::Full | IoSupport::NoMinWait if no_coalescing.is_some() => (
                IoBackend::Uring,
                Coalesce::Off,
                format!(
                    "--io auto: io_uring usable; no coalescing ({})",
                    no_coalescing.unwrap_or_default()
                ),
            ),
            IoSupport::Full => (
                IoBackend::Uring,
                Coalesce::Auto,
                "--io auto: io_uring usable, with min-wait coalescing".into(),
            ),
            IoSupport::NoMinWait => (
                IoBackend::Uring,
                Coalesce::Off,
                "--io auto: io_uring usable; no coalescing (the kernel lacks min-wait, Linux 6.12+)".into(),
            ),
            IoSupport::Unavailable(why) => (
                IoBackend::Epoll,
                Coalesce::Off,
                format!("--io auto: io_uring cannot be used here ({why}), so epoll"),
            ),
        }),
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
    if a.interval < Duration::from_millis(1) {
        return Err("--interval must be at least 1ms".into());
    }
    if a.coalesce.is_some() && a.io != IoChoice::Uring {
        return Err(format!("--coalesce-us only applies to --io uring (epoll reacts to every readiness event at once; --io auto, the default, coalesces automatically where it runs io_uring): add --io uring or drop --coalesce-us (--io {})", a.io.name()));
    }
    let coalesce = a.coalesce.unwrap_or(Coalesce::Off);
    if coalesce.fixed_us() > MAX_COALESCE_US {
        return Err(format!("--coalesce-us {} is too long: use 0 to {MAX_COALESCE_US}, or auto; it adds up to that much to measured latencies", coalesce.fixed_us()));
    }
    if a.timeout.is_zero() {
        return Err("--timeout must be longer than 0".into());
    }
    let thresholds = a
        .thresholds
        .iter()
        .map(|t| threshold::parse(t))
        .collect::<Result<Vec<_>, _>>()?;
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
        // Resolved per mode once the load model is known (resolve_io).
        io: IoBackend::Epoll,
        coalesce: Coalesce::Off,
        io_requested: a.io,
        io_reason: String::new(),
        json: a.json,
        prepare: a.prepare,
        command_line,
        interval: a.interval,
        hlog: a.hlog.clone(),
        thresholds,
        quiet: a.quiet,
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

fn open_config(a: &HttpArgs, c: &mut Config) -> Result<Option<OpenConfig>, String> {
    let sweep = a.steps.is_some() || a.find_max;
    if a.rate.is_none() && a.conn_rate.is_none() {
        if a.find_max {
            return Err("--find-max needs the kind of rate to search: give --rate START or --conn-rate START".into());
        }
        // The closed loop picks --urls at random too (the seed is recorded in the result), so a
        // seed goes with a URL list there; without one nothing in a closed loop is random.
        if a.seed.is_some() && a.urls.is_none() {
            return Err("--seed seeds the open loop's poisson gaps and the random picks of --urls: add --rate R, --conn-rate C or --urls FILE".into());
        }
        for (given, name) in [
            (a.steps.is_some(), "--steps"),
            (a.step_duration.is_some(), "--step-duration"),
            (a.slo.is_some(), "--slo"),
            (a.max_errors.is_some(), "--max-errors"),
            (a.find_max_resolution.is_some(), "--find-max-resolution"),
            (a.find_max_limit.is_some(), "--find-max-limit"),
            (!matches!(a.arrival, ArrivalArg::Uniform), "--arrival"),
            (a.spin_us.is_some(), "--spin-us"),
            (a.conns_per_step.is_some(), "--conns-per-step"),
        ] {
            if given {
                return Err(format!(
                    "{name} belongs to the open-loop modes: add --rate R or --conn-rate C"
                ));
            }
        }
        return Ok(None);
    }
    if a.rate.is_some() && a.conn_rate.is_some() {
        return Err(
            "--rate and --conn-rate are two different load models: give one of them".into(),
        );
    }
    for (v, name) in [
        (a.rate, "--rate"),
        (a.conn_rate, "--conn-rate"),
        (a.find_max_limit, "--find-max-limit"),
    ] {
        if let Some(r) = v {
            if !(r.is_finite() && r > 0.0 && r <= MAX_RATE) {
                return Err(format!(
                    "{name} {r}: give a positive number of at most {MAX_RATE} per second"
                ));
            }
        }
    }
    let spin = match a.spin_us.as_deref() {
        None | Some("auto") => SpinWindow::Auto,
        Some(text) => {
            let spin_us: u64 = text.parse().map_err(|_| {
                format!(
                    "--spin-us {text:?}: give a whole number of µs (0 to {MAX_SPIN_US}) or auto"
                )
            })?;
            if spin_us > MAX_SPIN_US {
                return Err(format!("--spin-us {spin_us} is longer than any timer wake-up lag worth covering: give 0 to {MAX_SPIN_US} (a few hundred µs reaches a schedule lag of a few µs on a VM), or auto"));
            }
            SpinWindow::Fixed(Duration::from_micros(spin_us))
        }
    };
    if a.requests.is_some() {
        return Err("--requests counts a closed loop; with a rate the length is --duration (or --steps/--step-duration)".into());
    }
    if a.pipeline != 1 {
        return Err("--pipeline applies to the closed loop; open-loop modes keep one request in flight per connection (raise -c instead)".into());
    }
    if a.conn_rate.is_none() && a.requests_per_conn != 1 {
        return Err("--requests-per-conn goes with --conn-rate".into());
    }
    if a.requests_per_conn == 0 {
        return Err("--requests-per-conn 0 would send nothing: give at least 1".into());
    }
    if a.conn_rate.is_some() && a.close && a.requests_per_conn > 1 {
        return Err(
            "--close allows one request per connection; drop it or use --requests-per-conn 1"
                .into(),
        );
    }
    if a.steps.is_some() && a.find_max {
        return Err(
            "--steps measures given rates and --find-max searches them: give one of them".into(),
        );
    }
    if sweep && a.conns_per_step.is_none() && a.common.duration.is_some() {
        return Err(
            "with --steps or --find-max each step lasts --step-duration; drop --duration".into(),
        );
    }
    if !sweep && a.step_duration.is_some() {
        return Err("--step-duration goes with --steps or --find-max".into());
    }
    if a.step_duration.is_some_and(|d| d.is_zero()) {
        return Err("--step-duration must be longer than 0".into());
    }
    if let Some(n) = a.conns_per_step {
        // The step's length follows from the count, and the count is what the step is: both must
        // be exact, which only a connection schedule with fixed gaps gives.
        if a.conn_rate.is_none() {
            return Err("--conns-per-step counts connections: it goes with --conn-rate".into());
        }
        if n == 0 {
            return Err("--conns-per-step 0 would open nothing: give at least 1".into());
        }
        if a.find_max {
            return Err("--conns-per-step goes with --steps or a single --conn-rate; a --find-max step lasts --step-duration".into());
        }
        if a.step_duration.is_some() || a.common.duration.is_some() {
            return Err(
                "with --conns-per-step a step lasts N / rate: drop --duration/--step-duration"
                    .into(),
            );
        }
        if !matches!(a.arrival, ArrivalArg::Uniform) {
            return Err("--conns-per-step needs --arrival uniform: with poisson gaps N connections take a random time, not N / rate".into());
        }
    }
    if !a.find_max
        && (a.slo.is_some()
            || a.max_errors.is_some()
            || a.find_max_resolution.is_some()
            || a.find_max_limit.is_some())
    {
        return Err(
            "--slo, --max-errors, --find-max-resolution and --find-max-limit go with --find-max"
                .into(),
        );
    }
    let find_max = if a.find_max {
        let slo_text = a
            .slo
            .as_deref()
            .ok_or("--find-max needs an objective: add --slo 'p99<=50ms' (or another percentile and bound)")?;
        let resolution = match &a.find_max_resolution {
            None => DEFAULT_FIND_MAX_RESOLUTION,
            Some(t) => sweep::parse_error_budget(t)
                .ok()
                .filter(|f| *f > 0.0 && *f < 1.0)
                .ok_or_else(|| format!("--find-max-resolution '{t}': give a percentage like 5% or a fraction like 0.05, above 0 and below 100%"))?,
        };
        let start = a
            .rate
            .or(a.conn_rate)
            .ok_or("--find-max needs --rate START or --conn-rate START")?;
        let limit = a.find_max_limit.unwrap_or(DEFAULT_FIND_MAX_LIMIT);
        if limit < start {
            return Err(format!(
                "--find-max-limit {limit} is below the start rate {start}"
            ));
        }
        Some(FindMax {
            slo: sweep::parse_slo(slo_text)?,
            max_errors: match &a.max_errors {
                None => DEFAULT_MAX_ERRORS,
                Some(t) => sweep::parse_error_budget(t)?,
            },
            resolution,
            limit,
        })
    } else {
        None
    };
    let steps = a.steps.as_deref().map(sweep::parse_steps).transpose()?;
    if c.threads > c.connections {
        return Err(format!(
            "--threads {} is more than --connections {}",
            c.threads, c.connections
        ));
    }
    if sweep || a.conns_per_step.is_some() {
        c.duration = None;
    }
    if a.conn_rate.is_some() && a.common.connections.is_none() {
        c.connections = DEFAULT_CONN_RATE_MAX_OPEN;
    }
    Ok(Some(OpenConfig {
        kind: match a.conn_rate {
            Some(_) => LoadKind::ConnRate {
                requests_per_conn: a.requests_per_conn,
            },
            None => LoadKind::Rate,
        },
        rate: a.rate,
        conn_rate: a.conn_rate,
        arrival: match a.arrival {
            ArrivalArg::Uniform => Arrival::Uniform,
            ArrivalArg::Poisson => Arrival::Poisson,
        },
        steps,
        step_duration: (sweep && a.conns_per_step.is_none())
            .then(|| a.step_duration.unwrap_or(DEFAULT_STEP_DURATION)),
        conns_per_step: a.conns_per_step,
        find_max,
        spin,
    }))
}

#[cfg(test)]
mod spin_window_tests {
    use super::{SpinWindow, DEFAULT_SPIN_US, MAX_SPIN_US};
    use std::time::Duration;

    const US: fn(u64) -> Duration = Duration::from_micros;

    #[test]
    fn a_given_window_is_kept_whatever_the_timer() {
        let w = SpinWindow::Fixed(US(300));
        assert_eq!(w.window(None, 10_000.0), (US(300), false));
        assert_eq!(w.window(Some(US(5_000)), 10_000.0), (US(300), false));
    }

    #[test]
    fn auto_widens_only_where_the_timer_is_coarse_for_the_rate() {
        let auto = SpinWindow::Auto;
        // 10k/s: 100 µs between sends; a 60 µs lag is more than a quarter of it.
        assert_eq!(auto.window(Some(US(60)), 10_000.0), (US(120), true));
        // 100/s: 10 ms between sends; the same lag is small beside it.
        assert_eq!(
            auto.window(Some(US(60)), 100.0),
            (US(DEFAULT_SPIN_US), false)
        );
        // Exactly a quarter is not "more than".
        assert_eq!(
            auto.window(Some(US(250)), 1_000.0),
            (US(DEFAULT_SPIN_US), false)
        );
        // Twice a tiny lag is still below the default: the default stays, not "widened".
        assert_eq!(
            auto.window(Some(US(5)), 100_000.0),
            (US(DEFAULT_SPIN_US), false)
        );
        // Never beyond the largest window --spin-us accepts.
        assert_eq!(
            auto.window(Some(US(8_000)), 1_000.0),
            (US(MAX_SPIN_US), true)
        );
        // Nothing measured (no timer): the default.
        assert_eq!(auto.window(None, 10_000.0), (US(DEFAULT_SPIN_US), false));
    }
}

#[cfg(test)]
mod io_resolution_tests {
    use super::*;
    use clap::Parser;

    /// `from_cli` for a command line, with io_uring support as given (None: the probe must not run).
    fn resolve(args: &[&str], support: Option<IoSupport>) -> Result<Config, String> {
        let argv: Vec<&str> = std::iter::once("netarena-load")
            .chain(args.iter().copied())
            .collect();
        let cli = Cli::try_parse_from(&argv).map_err(|e| e.to_string())?;
        from_cli(cli, Vec::new(), || {
            support.expect("the io_uring probe ran for --io epoll")
        })
    }

    fn engine(c: &Config) -> (IoBackend, Coalesce, &str) {
        (c.io, c.coalesce, c.io_reason.as_str())
    }

    const ECHO: [&str; 2] = ["echo", "127.0.0.1:9"];

    #[test]
    fn echo_with_io_uring_is_accepted_where_io_uring_is_usable() {
        for support in [IoSupport::Full, IoSupport::NoMinWait] {
            let c = resolve(&[&ECHO[..], &["--io", "uring"]].concat(), Some(support)).unwrap();
            assert_eq!(engine(&c), (IoBackend::Uring, Coalesce::Off, "--io uring"));
            assert_eq!(c.io_requested, IoChoice::Uring);
        }
        let refused = IoSupport::Unavailable("io_uring_disabled is 2".into());
        let err = resolve(&[&ECHO[..], &["--io", "uring"]].concat(), Some(refused))
            .err()
            .expect("refused");
        assert!(
            err.contains("io_uring_disabled is 2") && err.contains("--io epoll"),
            "{err}"
        );
    }

    #[test]
    fn echo_auto_picks_io_uring_where_usable_without_coalescing() {
        for support in [IoSupport::Full, IoSupport::NoMinWait] {
            let c = resolve(&ECHO, Some(support)).unwrap();
            let (io, coalesce, why) = engine(&c);
            assert_eq!((io, coalesce), (IoBackend::Uring, Coalesce::Off));
            assert!(
                why.starts_with("--io auto: io_uring usable; no coalescing (the echo flood"),
                "{why}"
            );
        }
        let c = resolve(&ECHO, Some(IoSupport::Unavailable("seccomp".into()))).unwrap();
        let (io, _, why) = engine(&c);
        assert_eq!(io, IoBackend::Epoll);
        assert!(
            why.contains("seccomp") && why.ends_with("so epoll"),
            "{why}"
        );
        let c = resolve(&[&ECHO[..], &["--io", "epoll"]].concat(), None).unwrap();
        assert_eq!(engine(&c), (IoBackend::Epoll, Coalesce::Off, "--io epoll"));
    }

    #[test]
    fn echo_refuses_a_coalescing_window() {
        let args = [&ECHO[..], &["--io", "uring", "--coalesce-us", "20"]].concat();
        let err = resolve(&args, Some(IoSupport::Full))
            .err()
            .expect("refused");
        assert!(
            err.contains("closed loop only: the echo flood") && err.contains("drop --coalesce-us"),
            "{err}"
        );
    }

    #[test]
    fn http_closed_loop_resolution_is_unchanged() {
        let http = ["http", "http://127.0.0.1:9/"];
        let c = resolve(&http, Some(IoSupport::Full)).unwrap();
        assert_eq!(
            engine(&c),
            (
                IoBackend::Uring,
                Coalesce::Auto,
                "--io auto: io_uring usable, with min-wait coalescing"
            )
        );
        let c = resolve(
            &[&http[..], &["--io", "uring", "--coalesce-us", "20"]].concat(),
            Some(IoSupport::Full),
        )
        .unwrap();
        assert_eq!(
            engine(&c),
            (IoBackend::Uring, Coalesce::Fixed(20), "--io uring")
        );
    }

    const HTTP: [&str; 2] = ["http", "http://127.0.0.1:9/"];

    #[test]
    fn the_open_loop_runs_on_io_uring_when_asked_without_coalescing() {
        for model in [
            &["--rate", "100"][..],
            &["--conn-rate", "10"],
            &["--rate", "100", "--steps", "100:200:100"],
        ] {
            let args = [&HTTP[..], model].concat();
            // auto keeps epoll for the open loop (measured cheaper), and says so.
            let c = resolve(&args, Some(IoSupport::Full)).expect("valid");
            let (io, coalesce, why) = engine(&c);
            assert_eq!(
                (io, coalesce),
                (IoBackend::Epoll, Coalesce::Off),
                "{model:?}"
            );
            assert!(
                why.contains("open loop") && why.contains("--io uring"),
                "{why}"
            );
            let c = resolve(
                &[&args[..], &["--io", "uring"]].concat(),
                Some(IoSupport::NoMinWait),
            )
            .expect("valid");
            assert_eq!(
                engine(&c),
                (IoBackend::Uring, Coalesce::Off, "--io uring"),
                "{model:?}"
            );
            let c = resolve(&[&args[..], &["--io", "epoll"]].concat(), None).expect("valid");
            assert_eq!(
                engine(&c),
                (IoBackend::Epoll, Coalesce::Off, "--io epoll"),
                "{model:?}"
            );
        }
    }

    /// https (HTTP/1.1 over TLS, h2 by ALPN) and h2c: every engine, chosen as for plain HTTP/1.1
    /// in each load model, with the closed loop's coalescing.
    #[test]
    fn https_and_http2_resolve_their_engine_as_plain_http_does() {
        let https = ["http", "https://127.0.0.1:9/", "--insecure"];
        let h2c = ["http", "http://127.0.0.1:9/", "--h2"];
        let h2 = ["http", "https://127.0.0.1:9/", "--insecure", "--h2"];
        for protocol in [&https[..], &h2c[..], &h2[..]] {
            let with = |extra: &[&str], support: IoSupport| {
                resolve(&[protocol, extra].concat(), Some(support)).expect("valid")
            };
            let plain = |extra: &[&str], support: IoSupport| {
                resolve(&[&HTTP[..], extra].concat(), Some(support)).expect("valid")
            };
            let cases: [(&[&str], IoSupport); 5] = [
                (&[], IoSupport::Full),
                (&[], IoSupport::NoMinWait),
                (&[], IoSupport::Unavailable("seccomp".into())),
                (&["--rate", "100"], IoSupport::Full),
                (&["--io", "uring", "--coalesce-us", "20"], IoSupport::Full),
            ];
            for (extra, support) in cases {
                let (c, p) = (with(extra, support.clone()), plain(extra, support));
                assert_eq!(engine(&c), engine(&p), "{protocol:?} {extra:?}");
            }
            for model in [&["--rate", "100"][..], &["--conn-rate", "10"]] {
                let c = with(&[model, &["--io", "uring"]].concat(), IoSupport::NoMinWait);
                assert_eq!(
                    engine(&c),
                    (IoBackend::Uring, Coalesce::Off, "--io uring"),
                    "{protocol:?} {model:?}"
                );
            }
        }
        let c = resolve(&https, Some(IoSupport::Full)).expect("valid");
        assert_eq!(
            engine(&c),
            (
                IoBackend::Uring,
                Coalesce::Auto,
                "--io auto: io_uring usable, with min-wait coalescing"
            )
        );
    }

    #[test]
    fn the_open_loop_refuses_coalescing_and_an_unusable_io_uring() {
        let rate = [&HTTP[..], &["--rate", "100"]].concat();
        let c = resolve(&rate, Some(IoSupport::Unavailable("no io_uring".into()))).expect("valid");
        assert_eq!(engine(&c).0, IoBackend::Epoll);
        let e = resolve(
            &[&rate[..], &["--io", "uring"]].concat(),
            Some(IoSupport::Unavailable("x".into())),
        )
        .err()
        .expect("refused");
        assert!(e.contains("--io epoll"), "{e}");
        let e = resolve(
            &[&rate[..], &["--io", "uring", "--coalesce-us", "10"]].concat(),
            Some(IoSupport::Full),
        )
        .err()
        .expect("refused");
        assert!(
            e.contains("closed loop only") && e.contains("drop --coalesce-us"),
            "{e}"
        );
    }
}
