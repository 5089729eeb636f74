//! The command line, as documented in docs/load-generator.md. Values are parsed here (clap reports
//! bad ones with exit code 2); cross-option rules and defaults live in `config`.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::parse::{parse_bytes, parse_duration};

/// `--version`: the package version and the cargo profile of this build (build.rs), e.g. "0.1.0 (release
/// build)". netarena records it with every run and warns when the generator is not the release build.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("NETARENA_LOAD_BUILD"),
    " build)"
);

#[derive(Parser, Debug)]
#[command(
    name = "netarena-load",
    version = VERSION,
    about = "netarena's load generator: HTTP/1.1 and TCP echo, verified, with HdrHistogram latencies"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant)] // parsed once per process
pub enum Command {
    /// HTTP/1.1 closed loop (keep-alive unless --close)
    Http(HttpArgs),
    /// TCP echo flood, verified byte for byte
    Echo(EchoArgs),
    /// Validate a run without sending anything: print its resolved configuration as JSON (exit 0), or exit 2 with the reason
    Check(CheckArgs),
    /// Fixed yardsticks for a run's calibration: a CPU loop, a reference server
    #[command(subcommand)]
    Calibrate(CalibrateCommand),
    /// Merge the result documents (--json) of one measurement spread over several generator processes or hosts into one document (JSON on stdout), or exit 2 naming the file that cannot be merged
    Merge(MergeArgs),
    /// Print a shell completion script: netarena-load completions bash > ~/.local/share/bash-completion/completions/netarena-load
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// `check [--skip-limits] http|echo ...`: the arguments of a run, after the same subcommand.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Leave out the open-files and port limits: check the options' rules only (a suite's level is
    /// checked before it is split over processes, each of which gets its own limits)
    #[arg(long)]
    pub skip_limits: bool,
    #[command(subcommand)]
    pub run: CheckCommand,
}

/// The run `check` looks at: `check http URL ...`, `check echo ...`.
#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant)] // parsed once per process
pub enum CheckCommand {
    /// The arguments of an `http` run
    Http(HttpArgs),
    /// The arguments of an `echo` run
    Echo(EchoArgs),
}

impl CheckCommand {
    /// The run these arguments describe.
    pub fn run(self) -> Command {
        match self {
            CheckCommand::Http(a) => Command::Http(a),
            CheckCommand::Echo(a) => Command::Echo(a),
        }
    }
}

/// `merge`: the parts' documents, and a name for each.
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Name of the part in the same position among the files (repeatable; default: the file's
    /// path); each open_loop.rate_not_met_reasons entry is prefixed with its part's name
    #[arg(long = "label", value_name = "NAME")]
    pub labels: Vec<String>,
    /// Result documents of netarena-load --json, one per part, all of the same run
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<std::path::PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum CalibrateCommand {
    /// Time a fixed CPU-bound loop; prints one JSON object (µs per unit)
    Cpu {
        /// Units to time (the median is the figure)
        #[arg(long, default_value_t = 25, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        units: u32,
    },
    /// Run the fixed reference HTTP/1.1 server until stopped; prints `listening on ADDR` once ready
    Serve {
        /// Address to listen on; port 0 picks a free one
        #[arg(long, default_value = "127.0.0.1:0", value_name = "ADDR")]
        listen: std::net::SocketAddr,
    },
}

#[derive(Args, Debug)]
pub struct CommonArgs {
    /// Concurrent connections, spread evenly over the threads [default: 100 (http), 1 (echo)]
    #[arg(short = 'c', long)]
    pub connections: Option<usize>,
    /// Event-loop threads
    #[arg(short = 't', long, default_value_t = 1)]
    pub threads: usize,
    /// Pin thread i to CPU LIST[i % len], e.g. 1 or 0,2 or 2-5
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Measured time after warm-up: 500ms, 10s, 2m, 1h or seconds [default: 10s for http]
    #[arg(short = 'd', long, value_parser = parse_duration, value_name = "D")]
    pub duration: Option<Duration>,
    /// Load applied but not counted before the measured phase
    #[arg(long, value_parser = parse_duration, value_name = "D")]
    pub warmup: Option<Duration>,
    /// A request, chunk echo or connect not complete within D is an error
    #[arg(long, value_parser = parse_duration, default_value = "5s", value_name = "D")]
    pub timeout: Duration,
    /// Bind connections round-robin to these local addresses: 127.0.0.2,127.0.0.3 or 127.0.1.1-127.0.1.20
    #[arg(long, value_name = "LIST")]
    pub source_ips: Option<String>,
    /// Allow this non-loopback target host (repeatable)
    #[arg(long, value_name = "HOST")]
    pub allow_target: Vec<String>,
    /// Start barrier: print "READY <unix_ns>" on stderr, read the start time (Unix ns) from stdin and
    /// begin then (open loop: after opening connections and the warm-up; closed loop and echo: the
    /// connections, the warm-up and the measured phase all start at that time)
    #[arg(long)]
    pub prepare: bool,
    /// Print the JSON result document on stdout instead of the human summary
    #[arg(long)]
    pub json: bool,
    /// Length of each per-interval latency histogram in the result
    #[arg(long, value_parser = parse_duration, default_value = "1s", value_name = "D")]
    pub interval: Duration,
    /// Also write the per-interval histograms as an HdrHistogram interval log to FILE
    #[arg(long, value_name = "FILE")]
    pub hlog: Option<std::path::PathBuf>,
    /// How sockets are driven: auto (io_uring where the kernel allows it, with automatic coalescing
    /// for the HTTP closed loop; epoll for the open loop, where it measured cheaper; the result says
    /// which ran and why), epoll (any Linux) or uring (io_uring, Linux 6.0+; every load model)
    #[arg(long, value_enum, default_value_t = IoChoice::Auto, value_name = "BACKEND")]
    pub io: IoChoice,
    /// --io uring and the HTTP closed loop only: after a completion, wait up to US microseconds for
    /// more before reacting (0: react at once, the default), or `auto`: at most 5% of the fastest
    /// recent response's latency, at most 50 µs. --io auto chooses `auto` itself where the kernel
    /// has io_uring's min-wait
    #[arg(long = "coalesce-us", value_parser = parse_coalesce, value_name = "US|auto")]
    pub coalesce: Option<Coalesce>,
    /// Pass/fail gate on the result, e.g. 'p99<=5ms', 'errors<=0.1%', 'rps>=50000' (repeatable);
    /// exit 99 when one fails
    #[arg(long = "threshold", value_name = "EXPR")]
    pub thresholds: Vec<String>,
    /// No progress lines on stderr (printed only when stderr is a terminal)
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// `--coalesce-us`: whether, and how long, the io_uring engine waits for more completions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coalesce {
    Off,
    Fixed(u32),
    /// A window that follows the latencies measured (see `uring::window::auto_window_us`).
    Auto,
}

impl Coalesce {
    pub fn name(self) -> &'static str {
        match self {
            Coalesce::Off => "off",
            Coalesce::Fixed(_) => "fixed",
            Coalesce::Auto => "auto",
        }
    }

    /// The fixed window in µs; 0 when off or automatic.
    pub fn fixed_us(self) -> u32 {
        match self {
            Coalesce::Fixed(us) => us,
            _ => 0,
        }
    }
}

fn parse_coalesce(text: &str) -> Result<Coalesce, String> {
    match text.trim() {
        "auto" => Ok(Coalesce::Auto),
        t => match t.parse::<u32>() {
            Ok(0) => Ok(Coalesce::Off),
            Ok(us) => Ok(Coalesce::Fixed(us)),
            Err(_) => Err(format!(
                "'{text}' is neither a number of microseconds nor 'auto'"
            )),
        },
    }
}

/// `--io` as asked; resolved into the `IoBackend` that runs (`config::resolve_io`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoChoice {
    Auto,
    Epoll,
    Uring,
}

impl IoChoice {
    pub fn name(self) -> &'static str {
        match self {
            IoChoice::Auto => "auto",
            IoChoice::Epoll => "epoll",
            IoChoice::Uring => "uring",
        }
    }
}

/// The engine that drives the sockets of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoBackend {
    Epoll,
    Uring,
}

impl IoBackend {
    pub fn name(self) -> &'static str {
        match self {
            IoBackend::Epoll => "epoll",
            IoBackend::Uring => "uring",
        }
    }
}

#[derive(Args, Debug)]
pub struct HttpArgs {
    /// http://HOST[:PORT]/PATH, or https://HOST[:PORT]/PATH (HTTP/1.1 over TLS)
    pub url: String,
    #[command(flatten)]
    pub common: CommonArgs,
    /// Stop after N completed responses instead of after --duration
    #[arg(short = 'n', long, value_name = "N")]
    pub requests: Option<u64>,
    /// One request per connection (Connection: close)
    #[arg(long)]
    pub close: bool,
    /// Requests in flight per connection
    #[arg(long, default_value_t = 1, value_name = "K")]
    pub pipeline: usize,
    #[arg(short = 'm', long, default_value = "GET", value_name = "M")]
    pub method: String,
    /// "Name: value" (repeatable)
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// Request body
    #[arg(long, value_name = "STR", conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Request body from a file
    #[arg(long, value_name = "PATH")]
    pub body_file: Option<std::path::PathBuf>,
    /// Expected status; any other is a `status` error [default: any 2xx/3xx]
    #[arg(long, value_name = "CODE", value_parser = clap::value_parser!(u16).range(100..=999))]
    pub expect_status: Option<u16>,
    /// Expected body length in bytes
    #[arg(long, value_name = "N")]
    pub expect_body_size: Option<u64>,
    /// Expected SHA-256 of the body (64 hex digits)
    #[arg(long, value_name = "HEX")]
    pub expect_body_sha256: Option<String>,
    /// The first response's status and body (size + sha256) become the expectation
    #[arg(long)]
    pub verify_learn: bool,
    /// https: trust the certificates of this PEM file (the server's CA, or its self-signed certificate)
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub cacert: Option<std::path::PathBuf>,
    /// https: accept any server certificate (the connection is still TLS)
    #[arg(long)]
    pub insecure: bool,
    /// https: resume TLS sessions on reconnects [default: every connection a full handshake]
    #[arg(long)]
    pub tls_resume: bool,
    /// HTTP/2: over https:// negotiated by ALPN h2, over http:// with prior knowledge (h2c)
    #[arg(long)]
    pub h2: bool,
    /// --h2: concurrent streams per connection (fewer if the server allows fewer) [default: 1]
    #[arg(long, value_name = "N")]
    pub streams: Option<u32>,
    /// --h2: every stream's and the connection's receive window, in bytes [default: 2^30-1, h2load's]
    #[arg(long, value_name = "BYTES")]
    pub h2_window: Option<u32>,
    /// Open loop: R requests per second in total, on the -c connections; latency counts from each request's intended send time
    #[arg(long, value_name = "R")]
    pub rate: Option<f64>,
    /// Open loop: C new connections per second, each doing --requests-per-conn requests then closing
    #[arg(long, value_name = "C")]
    pub conn_rate: Option<f64>,
    /// With --conn-rate: requests per connection, one after another (keep-alive)
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub requests_per_conn: u32,
    /// Gaps between intended starts: uniform (exactly 1/rate) or poisson (exponential, seeded)
    #[arg(long, value_enum, default_value = "uniform")]
    pub arrival: ArrivalArg,
    /// Seed for poisson gaps and random URL picks [default: from the clock; recorded in the result]
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// Rate sweep: LOW, LOW+STEP, ... HIGH (per second), one result per step
    #[arg(long, value_name = "LOW:HIGH:STEP")]
    pub steps: Option<String>,
    /// With --conn-rate (one rate or --steps): each step opens exactly N connections, so it lasts
    /// N / rate, plus the drain (httperf/autobench --num-conn); uniform arrivals only
    #[arg(long, value_name = "N")]
    pub conns_per_step: Option<u64>,
    /// Length of each step of --steps / --find-max [default: 5s]
    #[arg(long, value_parser = parse_duration, value_name = "D")]
    pub step_duration: Option<Duration>,
    /// Search the highest rate meeting --slo and --max-errors (start at --rate/--conn-rate, double, then bisect)
    #[arg(long)]
    pub find_max: bool,
    /// Latency objective for --find-max, on corrected latency: 'p99<=50ms'
    #[arg(long, value_name = "SLO")]
    pub slo: Option<String>,
    /// Error budget for --find-max: 0.1% or 0.001 [default: 0.1%]
    #[arg(long, value_name = "E")]
    pub max_errors: Option<String>,
    /// --find-max stops bisecting when the gap between pass and fail is below this fraction [default: 5%]
    #[arg(long, value_name = "F")]
    pub find_max_resolution: Option<String>,
    /// --find-max never asks more than this rate [default: 1000000]
    #[arg(long, value_name = "R")]
    pub find_max_limit: Option<f64>,
    /// Request paths or URLs (same host:port as URL), one per line; # starts a comment. Every request, in the
    /// closed loop and the open loop alike, takes the next one (--url-order; random picks follow --seed).
    /// After the URL a line may give the body's size in bytes and/or sha256=HEX: each response is held to
    /// its own URL's
    #[arg(long, value_name = "FILE")]
    pub urls: Option<std::path::PathBuf>,
    /// Order of --urls: random (seeded) or round-robin (each thread from its own offset)
    #[arg(long, value_enum, default_value = "random")]
    pub url_order: UrlOrderArg,
    /// Open loop: stop sleeping US µs before each intended send and busy-poll until it (0 always
    /// sleeps), or `auto` (the default): each load thread measures how late this machine's timer wakes
    /// it (p99) before connecting, and where that lag is more than a quarter of the time between its
    /// sends, busy-polls through twice the lag (recorded in the result, said in the summary); else 20.
    /// Spinning costs up to a core per thread; the busy-poll time is left out of the busy fraction
    #[arg(long = "spin-us", value_name = "US|auto")]
    pub spin_us: Option<String>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ArrivalArg {
    Uniform,
    Poisson,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum UrlOrderArg {
    Random,
    RoundRobin,
}

#[derive(Args, Debug)]
pub struct EchoArgs {
    /// HOST:PORT of a TCP echo server
    pub target: String,
    #[command(flatten)]
    pub common: CommonArgs,
    /// Bytes each connection sends and must get back (accepts 32k, 512KiB, 1m)
    #[arg(long, value_parser = parse_bytes, value_name = "B")]
    pub bytes: Option<u64>,
    /// Bytes per write; the next chunk goes out when the previous one is fully echoed
    #[arg(long, value_parser = parse_bytes, default_value = "32768", value_name = "C")]
    pub chunk: u64,
    /// While the flood runs, every I a probe connects, echoes 32 KiB and closes
    #[arg(long, value_parser = parse_duration, value_name = "I")]
    pub probe_interval: Option<Duration>,
}
