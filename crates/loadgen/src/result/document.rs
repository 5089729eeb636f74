//! The result document (docs/load-generator.md, docs/schema/netarena-load.schema.json), a pure
//! function of the configuration and the measurements, and its HdrHistogram log; the human summary
//! of it is `human`'s.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::config::{Config, HttpConfig, LoadKind, Mode, OpenConfig};
use crate::histogram;
use crate::http::hex;
use crate::io::echo::ProbeResult;
use crate::io::worker::ThreadSummary;
use crate::load::open::{OpenStats, LATE_THRESHOLD};
use crate::load::open_run::{
    achieved_rate, FindMaxSearch, StepVerdict, FIND_MAX_GROWTH, LAG_P99_LIMIT, RATE_MET_FRACTION,
};
use crate::load::run::RunOutcome;
use crate::stats::{self, ErrorClass, ThreadStats};
use crate::sys::rfc3339_utc;

pub const SCHEMA_VERSION: u32 = 1;
/// Any one load thread busy at least this fraction of the measured time means the generator was
/// the bottleneck: that thread's connections waited on it, not on the server, even if the other
/// threads idled (so the test is on the busiest thread, not on the mean).
pub const SATURATION_BUSY_FRACTION: f64 = 0.90;

/// A thread that waited for a CPU this fraction of its time or more had its CPUs shared with other
/// work: the human summary says so, since more threads will not help, CPUs of its own will.
pub const NOTABLE_RUN_DELAY_FRACTION: f64 = 0.10;

#[derive(Serialize, Deserialize, Clone)]
pub struct Document {
    pub schema_version: u32,
    pub tool: Tool,
    pub mode: String,
    pub command_line: Vec<String>,
    pub config: ConfigDoc,
    pub started_at: String,
    pub ended_at: String,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub totals: Totals,
    pub throughput: Throughput,
    pub latency: Latency,
    pub timeline: Vec<TimelineEntry>,
    pub errors: Errors,
    pub generator: Generator,
    pub generator_saturated: bool,
    pub no_answer: NoAnswerDoc,
    pub echo: Option<EchoDoc>,
    /// https: the TLS sessions (null for http:// and echo).
    pub tls: Option<TlsDoc>,
    /// `--h2`: the HTTP/2 settings and what the server said of the connections (null for
    /// HTTP/1.1 and echo; absent from documents older than HTTP/2).
    #[serde(default)]
    pub http2: Option<Http2Doc>,
    /// True when `latency` counts from each request's intended send time (open-loop modes).
    pub latency_corrected: bool,
    pub intervals: IntervalsDoc,
    pub open_loop: Option<OpenLoopDoc>,
    /// `--steps` / `--find-max`: one complete result per measured rate, in the order measured.
    pub steps: Option<Vec<Document>>,
    pub find_max: Option<FindMaxDoc>,
    /// The first SIGINT/SIGTERM ended the measured phase early: the figures cover what was measured
    /// until then (`duration_s` says how long). Set by the caller; false here.
    pub interrupted: bool,
    /// `--threshold` verdicts, in the order given (empty without thresholds). Judged by the caller
    /// on the finished document (`thresholds::evaluate`); empty here.
    pub thresholds: Vec<ThresholdDoc>,
    /// Wall-clock start of the measured phase, for the `--hlog` header. Not in the JSON: a document
    /// read back (`merge`) has the Unix epoch here, and nothing writes an hlog of it.
    #[serde(skip, default = "unix_epoch")]
    pub started_at_wall: std::time::SystemTime,
}

fn unix_epoch() -> std::time::SystemTime {
    std::time::UNIX_EPOCH
}

/// A threshold's verdict, as it appears in the result's `thresholds` list.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct ThresholdDoc {
    pub expr: String,
    pub metric: String,
    pub op: String,
    pub limit: f64,
    pub unit: String,
    /// None when the run has nothing to judge: no successful response for a latency metric, or no
    /// attempt at all for `errors`. Such a threshold fails.
    pub measured: Option<f64>,
    pub pass: bool,
}

/// Connections the server left waiting: still waiting at the end of the measured phase (a request
/// in flight, or the connect not complete), without a single answer during it.
#[derive(Serialize, Deserialize, Clone)]
pub struct NoAnswerDoc {
    pub connections: u64,
    /// Of how many: `-c` (closed loop, `--rate` pool); connections started (`--conn-rate`).
    pub of_connections: u64,
    pub fraction: f64,
    pub flag_fraction: f64,
    /// fraction >= flag_fraction (in a sweep: in any step).
    pub flagged: bool,
}

pub fn no_answer_doc(connections: u64, of_connections: u64) -> NoAnswerDoc {
    let fraction = if of_connections > 0 {
        connections as f64 / of_connections as f64
    } else {
        0.0
    };
    NoAnswerDoc {
        connections,
        of_connections,
        fraction,
        flag_fraction: stats::NO_ANSWER_FLAG_FRACTION,
        flagged: stats::no_answer_flagged(connections, of_connections),
    }
}

#[derive(Serialize, Deserialize, Clone)]
pub struct IntervalsDoc {
    pub interval_s: f64,
    pub encoding: String,
    pub unit: String,
    pub entries: Vec<IntervalEntry>,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct IntervalEntry {
    /// Start of the interval, seconds after the start of the measured phase.
    pub t_s: f64,
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p99_9_us: u64,
    pub max_us: u64,
    pub data: String,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct OpenLoopDoc {
    pub kind: String,
    pub arrival: String,
    pub seed: u64,
    /// Requests (rate) or connections (conn_rate) per second asked; null for a whole sweep.
    pub asked_rate_per_s: Option<f64>,
    pub achieved_rate_per_s: f64,
    pub intended: u64,
    pub started: u64,
    pub late: u64,
    pub late_threshold_us: u64,
    pub dropped: u64,
    pub dropped_overflow: u64,
    pub dropped_unsent: u64,
    pub rate_not_met: bool,
    pub rate_not_met_reasons: Vec<String>,
    pub latency_uncorrected: Latency,
    pub schedule_lag: Latency,
    /// The spin window the phase ran with (the widest of the threads'): the thread busy-polls
    /// instead of sleeping when its next send is this close.
    pub spin_us: u64,
    /// `--spin-us auto` (the default): what was measured and chosen; None with a window given.
    pub spin_auto: Option<SpinAutoDoc>,
    /// Seconds (summed over threads) of loop turns that only busy-polled for the next send; left
    /// out of `generator.busy_fraction`.
    pub spin_wait_s: f64,
    pub connections: Option<ConnRateDoc>,
}

/// `open_loop.spin_auto`: the timer measured by each load thread before it connected, and the
/// window chosen from it for this phase's rate (`config::SpinWindow::window`).
#[derive(Serialize, Deserialize, Clone)]
pub struct SpinAutoDoc {
    /// The largest of the threads' timer wake-up lag p99 (µs).
    pub timer_lag_p99_us: u64,
    /// The shortest time between one thread's sends at this phase's rate (µs).
    pub send_gap_us: u64,
    /// The lag was more than `AUTO_SPIN_LAG_SHARE` of the gap, so the window was widened.
    pub widened: bool,
}

/// https: what the TLS handshakes agreed on and how many there were in the measured phase.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct TlsDoc {
    /// "TLSv1_3", "TLSv1_2" (rustls' names); null if no handshake completed.
    pub version: Option<String>,
    /// The IANA name, e.g. "TLS13_AES_256_GCM_SHA384"; null if no handshake completed.
    pub cipher_suite: Option<String>,
    /// The ALPN protocol the server chose ("http/1.1" is offered); null if it chose none.
    pub alpn: Option<String>,
    /// Handshakes completed in the measured phase, and of them those resuming a session.
    pub handshakes: u64,
    pub resumed: u64,
    /// `--tls-resume`: sessions were offered for resumption on reconnects.
    pub resume: bool,
    /// False with `--insecure` (any certificate accepted), true with `--cacert`.
    pub certificate_verified: bool,
}

/// `--h2`: how the connections ran.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Http2Doc {
    /// "h2" (over TLS, chosen by ALPN) or "h2c" (cleartext, prior knowledge).
    pub protocol: String,
    /// `--streams`: streams in flight per connection asked for (a server may allow fewer).
    pub streams: u32,
    /// `--h2-window`: every stream's and the connection's receive window, in bytes.
    pub window: u32,
    /// GOAWAY frames received in the measured phase, graceful ones included (those with an error
    /// code are also `h2_goaway` errors).
    pub goaways: u64,
}

fn http2_doc(cfg: &Config, goaways: u64) -> Option<Http2Doc> {
    let Mode::Http(HttpConfig {
        h2: Some(h2), tls, ..
    }) = &cfg.mode
    else {
        return None;
    };
    Some(Http2Doc {
        protocol: if tls.is_some() { "h2" } else { "h2c" }.into(),
        streams: h2.settings.streams,
        window: h2.settings.window,
        goaways,
    })
}

/// A run's `tls` block from its merged counts (None for http:// and echo).
fn tls_doc(cfg: &Config, t: &stats::TlsStats) -> Option<TlsDoc> {
    let Mode::Http(HttpConfig {
        tls: Some(settings),
        ..
    }) = &cfg.mode
    else {
        return None;
    };
    Some(TlsDoc {
        version: t.version.map(str::to_string),
        cipher_suite: t.cipher_suite.map(str::to_string),
        alpn: t.alpn.clone(),
        handshakes: t.handshakes,
        resumed: t.resumed,
        resume: settings.resume,
        certificate_verified: settings.verified,
    })
}

#[derive(Serialize, Deserialize, Clone)]
pub struct ConnRateDoc {
    pub requests_per_conn: u32,
    pub started: u64,
    pub completed: u64,
    pub ended_early: u64,
    pub failed: u64,
    /// Closed at the drain deadline with a request still unanswered.
    pub unfinished: u64,
    pub lifetime: Latency,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct FindMaxDoc {
    pub method: String,
    pub slo: String,
    pub slo_percentile: f64,
    pub slo_max_latency_us: u64,
    pub max_errors_fraction: f64,
    pub start_rate_per_s: f64,
    pub growth_factor: f64,
    pub resolution_fraction: f64,
    pub limit_rate_per_s: f64,
    /// The highest measured rate that met every criterion; null when even the first did not.
    pub found_rate_per_s: Option<f64>,
    /// One verdict per entry of `steps`, same order.
    pub verdicts: Vec<StepVerdict>,
    /// Why the search stopped.
    pub stopped_because: String,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct ConfigDoc {
    pub target: String,
    pub connections: usize,
    pub threads: usize,
    pub cpus: Vec<usize>,
    pub duration_s: Option<f64>,
    pub requests: Option<u64>,
    pub warmup_s: f64,
    pub timeout_s: f64,
    pub close: bool,
    pub pipeline: usize,
    pub method: Option<String>,
    pub headers: Vec<String>,
    pub body_bytes: usize,
    pub expect_status: Option<u16>,
    pub expect_body_size: Option<u64>,
    pub expect_body_sha256: Option<String>,
    pub verify_learn: bool,
    pub source_ips: Vec<String>,
    pub interval_s: f64,
    pub hlog: Option<String>,
    pub rate: Option<f64>,
    pub conn_rate: Option<f64>,
    pub requests_per_conn: Option<u32>,
    pub arrival: Option<String>,
    pub seed: Option<u64>,
    pub steps: Option<Vec<f64>>,
    pub step_duration_s: Option<f64>,
    pub conns_per_step: Option<u64>,
    pub find_max: bool,
    pub slo: Option<String>,
    pub max_errors: Option<f64>,
    pub urls_file: Option<String>,
    pub url_count: usize,
    pub url_order: Option<String>,
    pub prepare: bool,
    pub bytes_per_connection: Option<u64>,
    pub chunk_bytes: Option<u64>,
    pub probe_interval_s: Option<f64>,
    pub io_backend: String,
    pub coalesce_us: u32,
    pub coalesce: String,
    /// `--io` as asked (auto, epoll, uring) and why io_backend/coalesce are what they are.
    pub io_requested: String,
    pub io_reason: String,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct Totals {
    pub requests: u64,
    pub responses: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub connections_opened: u64,
    pub errors: u64,
    /// Requests (echo: chunks) still unanswered when the measured phase ended; not in `errors`.
    pub unfinished: u64,
    /// Responses (echo: chunks) that arrived during the warm-up, in no other figure: with `responses`,
    /// all the server answered in the run.
    pub warmup_responses: u64,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct Throughput {
    pub requests_per_s: f64,
    pub bytes_per_s: f64,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct Latency {
    /// Entries, censored ones included.
    pub count: u64,
    /// Entries that are lower bounds: the wait so far of requests unfinished at the end (only on
    /// `latency` and `open_loop.latency_uncorrected`). With any, every percentile is a lower bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub censored: Option<u64>,
    pub min_us: u64,
    pub p50_us: u64,
    pub p75_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p99_9_us: u64,
    pub p99_99_us: u64,
    pub max_us: u64,
    pub mean_us: f64,
    pub stdev_us: f64,
    pub histogram: HistogramDoc,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct HistogramDoc {
    pub encoding: String,
    pub unit: String,
    pub lowest_trackable: u64,
    pub highest_trackable: u64,
    pub significant_digits: u8,
    pub data: String,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct TimelineEntry {
    pub t_s: f64,
    pub requests: u64,
    pub bytes_received: u64,
    pub errors: u64,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct Errors {
    pub total: u64,
    pub by_class: BTreeMap<String, u64>,
    pub status_codes: BTreeMap<String, u64>,
    pub examples: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct Generator {
    pub threads: usize,
    pub cpus: Vec<usize>,
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    /// Mean over the load threads of busy time / wall time, busy meaning not available for more
    /// work: on a CPU, or runnable and waiting for one (run_delay).
    pub busy_fraction: f64,
    /// The busiest load thread's busy time / wall time; `saturated` is judged on this.
    pub busy_fraction_max: f64,
    /// Seconds (summed over threads) the load threads were runnable but waited for a CPU; None
    /// when the kernel keeps no schedstat.
    pub run_delay_s: Option<f64>,
    /// The largest share of one load thread's wall time spent waiting for a CPU.
    pub run_delay_fraction_max: Option<f64>,
    /// Whether the busy fractions count run_delay; false (CPU time only) without schedstat.
    pub busy_counts_run_delay: bool,
    pub saturated: bool,
    /// Bound on what batching added to any measured latency (µs): null for epoll.
    pub batch_wait_max_us: Option<f64>,
    /// Share of the measured phase (thread time) whose waits held out for a batch: 0 with coalescing
    /// off, 1 with a fixed window, with `auto` the share its CPU trial kept the window; null for epoll.
    pub batch_wait_share: Option<f64>,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct EchoDoc {
    pub bytes_per_connection: Option<u64>,
    pub chunk_bytes: u64,
    pub connections_completed: u64,
    pub completion_time_s: Option<f64>,
    pub verified_bytes: u64,
    pub probe: Option<ProbeDoc>,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct ProbeDoc {
    pub interval_s: f64,
    pub attempts: u64,
    pub completed: u64,
    pub errors: u64,
    pub examples: Vec<String>,
    pub latency: Latency,
}

pub fn latency_doc(h: &Histogram<u64>) -> Latency {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .expect("serializing to memory cannot fail");
    let empty = h.is_empty();
    let q = |p: f64| if empty { 0 } else { h.value_at_quantile(p) };
    Latency {
        count: h.len(),
        censored: None,
        min_us: if empty { 0 } else { h.min() },
        p50_us: q(0.50),
        p75_us: q(0.75),
        p90_us: q(0.90),
        p99_us: q(0.99),
        p99_9_us: q(0.999),
        p99_99_us: q(0.9999),
        max_us: if empty { 0 } else { h.max() },
        mean_us: if empty { 0.0 } else { h.mean() },
        stdev_us: if empty { 0.0 } else { h.stdev() },
        histogram: HistogramDoc {
            encoding: "hdrhistogram-v2-deflate-base64".into(),
            unit: "us".into(),
            lowest_trackable: histogram::HIST_LOWEST_US,
            highest_trackable: histogram::HIST_HIGHEST_US,
            significant_digits: histogram::HIST_SIGFIG,
            data: base64::engine::general_purpose::STANDARD.encode(&bytes),
        },
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// The document's `config`: the run as configured, defaults applied (also what `check` prints).
pub fn config_doc(cfg: &Config) -> ConfigDoc {
    let (http, echo_cfg) = match &cfg.mode {
        Mode::Http(h) => (Some(h), None),
        Mode::Echo(e) => (None, Some(e)),
    };
    let open = http.and_then(|h| h.open.as_ref());
    ConfigDoc {
        target: cfg.target.clone(),
        connections: cfg.connections,
        threads: cfg.threads,
        cpus: cfg.cpus.clone(),
        duration_s: cfg.duration.map(secs),
        requests: http.and_then(|h| h.requests),
        warmup_s: secs(cfg.warmup),
        timeout_s: secs(cfg.timeout),
        close: http.is_some_and(|h| h.close),
        pipeline: http.map_or(1, |h| h.pipeline),
        method: http.map(|h| h.method.clone()),
        headers: http.map(|h| h.headers.clone()).unwrap_or_default(),
        body_bytes: http.map_or(0, |h| h.body_bytes),
        expect_status: http.and_then(|h| h.expect.status),
        expect_body_size: http.and_then(|h| h.expect.body_size),
        expect_body_sha256: http.and_then(|h| h.expect.body_sha256.map(|d| hex(&d))),
        verify_learn: http.is_some_and(|h| h.verify_learn),
        source_ips: cfg.source_ips.iter().map(|i| i.to_string()).collect(),
        interval_s: secs(cfg.interval),
        hlog: cfg.hlog.as_ref().map(|p| p.display().to_string()),
        rate: open.and_then(|o| o.rate),
        conn_rate: open.and_then(|o| o.conn_rate),
        requests_per_conn: open.and_then(|o| match o.kind {
            LoadKind::ConnRate { requests_per_conn } => Some(requests_per_conn),
            LoadKind::Rate => None,
        }),
        arrival: open.map(|o| o.arrival.name().into()),
        seed: http.map(|h| h.seed),
        steps: open.and_then(|o| o.steps.clone()),
        step_duration_s: open.and_then(|o| o.step_duration.map(secs)),
        conns_per_step: open.and_then(|o| o.conns_per_step),
        find_max: open.is_some_and(|o| o.find_max.is_some()),
        slo: open.and_then(|o| o.find_max.as_ref().map(|f| f.slo.describe())),
        max_errors: open.and_then(|o| o.find_max.as_ref().map(|f| f.max_errors)),
        urls_file: http.and_then(|h| h.urls_file.as_ref().map(|p| p.display().to_string())),
        url_count: http.map_or(0, |h| h.requests_wire.wire.len()),
        url_order: http.and_then(|h| {
            h.urls_file
                .as_ref()
                .map(|_| h.requests_wire.order.name().into())
        }),
        prepare: cfg.prepare,
        bytes_per_connection: echo_cfg.and_then(|e| e.bytes_per_connection),
        chunk_bytes: echo_cfg.map(|e| e.chunk_bytes),
        probe_interval_s: echo_cfg.and_then(|e| e.probe_interval.map(secs)),
        io_backend: cfg.io.name().into(),
        coalesce_us: cfg.coalesce.fixed_us(),
        coalesce: cfg.coalesce.name().into(),
        io_requested: cfg.io_requested.name().into(),
        io_reason: cfg.io_reason.clone(),
    }
}

pub fn document(cfg: &Config, run: &RunOutcome) -> Document {
    let s = &run.stats;
    let duration_s = secs(run.duration);
    let per_s = |n: u64| {
        if duration_s > 0.0 {
            n as f64 / duration_s
        } else {
            0.0
        }
    };

    // Every second of the measured phase gets an entry, zeros included: a stall must show.
    let seconds = (duration_s.ceil() as usize).max(s.timeline.len());
    let timeline = (0..seconds)
        .map(|i| {
            let sec = s.timeline.get(i).copied().unwrap_or_default();
            // The last second may be partial: its entry ends at duration_s.
            let end = (i + 1) as f64;
            let t_s = if end > duration_s && duration_s > i as f64 {
                duration_s
            } else {
                end
            };
            TimelineEntry {
                t_s,
                requests: sec.requests,
                bytes_received: sec.bytes_received,
                errors: sec.errors,
            }
        })
        .collect();

    let gen = generator_cpu(&run.threads);
    let saturated = is_saturated(gen.busy_max);
    let batchings = || run.threads.iter().filter_map(|t| t.batching);
    let by_class = ErrorClass::ALL
        .iter()
        .map(|&c| (c.name().to_string(), s.errors[c as usize]))
        .collect();
    let examples = s.examples.clone();

    let (http, echo_cfg) = match &cfg.mode {
        Mode::Http(h) => (Some(h), None),
        Mode::Echo(e) => (None, Some(e)),
    };
    let open = http.and_then(|h| h.open.as_ref());
    let config = config_doc(cfg);

    let echo = echo_cfg.map(|e| EchoDoc {
        bytes_per_connection: e.bytes_per_connection,
        chunk_bytes: e.chunk_bytes,
        connections_completed: s.connections_completed,
        completion_time_s: e.bytes_per_connection.map(|_| duration_s),
        verified_bytes: s.verified_bytes,
        probe: run.probe.as_ref().map(|p: &ProbeResult| ProbeDoc {
            interval_s: e.probe_interval.map_or(0.0, secs),
            attempts: p.attempts,
            completed: p.completed,
            errors: p.errors,
            examples: p.examples.clone(),
            latency: latency_doc(&p.hist),
        }),
    });

    let errors_total = s.errors_total();
    Document {
        schema_version: SCHEMA_VERSION,
        tool: Tool {
            name: "netarena-load".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        mode: cfg.mode_name().into(),
        command_line: cfg.command_line.clone(),
        config,
        started_at: rfc3339_utc(run.started_at),
        ended_at: rfc3339_utc(run.started_at + run.duration),
        duration_s,
        warmup_s: secs(run.warmup),
        totals: Totals {
            requests: s.requests,
            responses: s.responses,
            bytes_sent: s.bytes_sent,
            bytes_received: s.bytes_received,
            connections_opened: s.connections_opened,
            errors: errors_total,
            unfinished: s.unfinished,
            warmup_responses: s.warmup_responses,
        },
        throughput: Throughput {
            requests_per_s: per_s(s.requests),
            bytes_per_s: per_s(s.bytes_received),
        },
        latency: Latency {
            censored: Some(s.censored),
            ..latency_doc(&s.hist)
        },
        timeline,
        errors: Errors {
            total: errors_total,
            by_class,
            status_codes: s
                .status_codes
                .iter()
                .map(|(c, n)| (c.to_string(), *n))
                .collect(),
            examples,
        },
        generator: Generator {
            threads: cfg.threads,
            cpus: run.threads.iter().filter_map(|t| t.cpu).collect(),
            cpu_user_s: gen.user_s,
            cpu_sys_s: gen.sys_s,
            busy_fraction: gen.busy,
            busy_fraction_max: gen.busy_max,
            run_delay_s: gen.run_delay_s,
            run_delay_fraction_max: gen.run_delay_max,
            busy_counts_run_delay: gen.run_delay_s.is_some(),
            saturated,
            batch_wait_max_us: batchings()
                .map(|b| b.max_window)
                .max()
                .map(|d| d.as_secs_f64() * 1e6),
            // The mean over threads, as for the busy share (the threads measure the same phase).
            batch_wait_share: batchings()
                .next()
                .map(|_| busy_fractions(batchings().map(|b| (b.windowed_time, b.time))).0),
        },
        generator_saturated: saturated,
        no_answer: no_answer_doc(s.unanswered_connections, run.connections_used(cfg)),
        echo,
        tls: tls_doc(cfg, &s.tls),
        http2: http2_doc(cfg, s.h2_goaways),
        latency_corrected: open.is_some(),
        intervals: intervals_doc(&s.intervals.done, cfg.interval, run.duration),
        open_loop: run.open.as_ref().map(|step| {
            let (h, o) = open_config(cfg);
            open_loop_doc(h, o, Some(step.rate), &step.stats, step.schedule)
        }),
        steps: None,
        find_max: None,
        interrupted: run.interrupted,
        thresholds: Vec::new(),
        started_at_wall: run.started_at,
    }
}

/// Connections left waiting in one measured phase.
pub fn no_answer(cfg: &Config, run: &RunOutcome) -> NoAnswerDoc {
    no_answer_doc(run.stats.unanswered_connections, run.connections_used(cfg))
}

/// The open loop's result: one rate's document, or a sweep's (`--steps`, `--find-max`) with every
/// step's document and the search.
pub fn open_loop_document(
    cfg: &Config,
    steps: &[RunOutcome],
    search: Option<&FindMaxSearch>,
) -> Document {
    let (_, o) = open_config(cfg);
    if o.steps.is_none() && o.find_max.is_none() {
        return document(cfg, &steps[0]);
    }
    let mut top = sweep_document(cfg, steps);
    top.steps = Some(steps.iter().map(|s| document(cfg, s)).collect());
    if let (Some(fm), Some(search)) = (&o.find_max, search) {
        top.find_max = Some(FindMaxDoc {
            method: "geometric growth (x2) from the start rate until a step fails, then bisection between the highest passing and the lowest failing rate".into(),
            slo: fm.slo.describe(),
            slo_percentile: fm.slo.percentile,
            slo_max_latency_us: fm.slo.max_latency.as_micros() as u64,
            max_errors_fraction: fm.max_errors,
            start_rate_per_s: o.base_rate(),
            growth_factor: FIND_MAX_GROWTH,
            resolution_fraction: fm.resolution,
            limit_rate_per_s: fm.limit,
            found_rate_per_s: search.found,
            verdicts: search.verdicts.clone(),
            stopped_because: search.stopped_because.clone(),
        });
    }
    top
}

fn open_config_of(cfg: &Config) -> Option<(&HttpConfig, &OpenConfig)> {
    match &cfg.mode {
        Mode::Http(h) => h.open.as_ref().map(|o| (h, o)),
        Mode::Echo(_) => None,
    }
}

/// The open loop's configuration; only called for an open-loop run.
fn open_config(cfg: &Config) -> (&HttpConfig, &OpenConfig) {
    open_config_of(cfg).expect("an open-loop configuration")
}

/// The whole sweep as one result: counts and histograms merged over the steps, the timeline and
/// the intervals concatenated in the order measured.
pub fn sweep_document(cfg: &Config, steps: &[RunOutcome]) -> Document {
    let (h, o) = open_config(cfg);
    let first = &steps[0];
    let mut stats = ThreadStats::new(Instant::now(), Instant::now(), None);
    let mut timeline = Vec::new();
    let mut intervals = Vec::new();
    let mut open = OpenStats::new();
    let mut duration = Duration::ZERO;
    let mut threads: Vec<ThreadSummary> = Vec::new();
    for s in steps {
        let st = &s.stats;
        let step = s.open.as_ref().expect("an open-loop step");
        stats.merge(st);
        let seconds = s.duration.as_secs_f64().ceil() as usize;
        let mut tl = st.timeline.clone();
        tl.resize(seconds.max(tl.len()), Default::default());
        timeline.extend(tl);
        let offset = (duration.as_nanos() / cfg.interval.as_nanos()) as u64;
        intervals.extend(
            st.intervals
                .done
                .iter()
                .map(|(i, b)| (i + offset, b.clone())),
        );
        // Each step is padded to whole intervals, so the next one starts on a boundary.
        let n = s.duration.as_nanos().div_ceil(cfg.interval.as_nanos());
        duration += Duration::from_nanos((n * cfg.interval.as_nanos()) as u64);
        open.merge(&step.stats);
        for (k, t) in s.threads.iter().enumerate() {
            if threads.len() <= k {
                threads.push(ThreadSummary {
                    cpu: t.cpu,
                    cpu_time: Duration::ZERO,
                    wall_time: Duration::ZERO,
                    user_time: Duration::ZERO,
                    sys_time: Duration::ZERO,
                    run_delay: Some(Duration::ZERO),
                    batching: None,
                });
            }
            threads[k].cpu_time += t.cpu_time;
            threads[k].wall_time += t.wall_time;
            threads[k].user_time += t.user_time;
            threads[k].sys_time += t.sys_time;
            // Unknown in any step (no schedstat) is unknown for the run.
            threads[k].run_delay = threads[k].run_delay.zip(t.run_delay).map(|(a, b)| a + b);
        }
    }
    stats.timeline = timeline;
    stats.intervals.done = intervals;
    let measured: Duration = steps.iter().map(|s| s.duration).sum();
    let scheduled: Duration = steps
        .iter()
        .filter_map(|s| s.open.as_ref().map(|step| step.schedule))
        .sum();
    let outcome = RunOutcome {
        stats,
        threads,
        started_at: first.started_at,
        duration: measured,
        warmup: first.warmup,
        probe: None,
        open: None,
        interrupted: steps.iter().any(|s| s.interrupted),
    };
    let mut doc = document(cfg, &outcome);
    doc.intervals = intervals_doc(&outcome.stats.intervals.done, cfg.interval, duration);
    // Counts summed over the steps; flagged when any step was.
    let per_step: Vec<_> = steps.iter().map(|s| no_answer(cfg, s)).collect();
    doc.no_answer = no_answer_doc(
        per_step.iter().map(|n| n.connections).sum(),
        per_step.iter().map(|n| n.of_connections).sum(),
    );
    doc.no_answer.flagged = per_step.iter().any(|n| n.flagged);
    let mut od = open_loop_doc(h, o, None, &open, scheduled);
    // A sweep is marked when any of its steps was.
    let marked: Vec<String> = steps
        .iter()
        .filter_map(|s| {
            let step = s.open.as_ref()?;
            let d = open_loop_doc(h, o, Some(step.rate), &step.stats, step.schedule);
            d.rate_not_met.then(|| {
                format!(
                    "step {}/s: {}",
                    step.rate,
                    d.rate_not_met_reasons.join("; ")
                )
            })
        })
        .collect();
    od.rate_not_met = !marked.is_empty();
    od.rate_not_met_reasons = marked;
    doc.open_loop = Some(od);
    doc
}

pub fn open_loop_doc(
    h: &HttpConfig,
    o: &OpenConfig,
    asked: Option<f64>,
    s: &OpenStats,
    duration: Duration,
) -> OpenLoopDoc {
    let achieved = achieved_rate(s, duration);
    let lag = latency_doc(&s.lag);
    let mut reasons = Vec::new();
    if let Some(asked) = asked {
        if achieved < RATE_MET_FRACTION * asked {
            reasons.push(format!(
                "achieved {achieved:.1}/s of the asked {asked}/s (below {:.0}%)",
                RATE_MET_FRACTION * 100.0
            ));
        }
    }
    if s.dropped() > 0 {
        reasons.push(format!(
            "{} arrivals dropped ({} over the backlog/connection cap, {} unsent at the end)",
            s.dropped(),
            s.dropped_overflow,
            s.dropped_unsent
        ));
    }
    if lag.p99_us > LAG_P99_LIMIT.as_micros() as u64 {
        reasons.push(format!(
            "schedule lag p99 {} us above {} us",
            lag.p99_us,
            LAG_P99_LIMIT.as_micros()
        ));
    }
    let (kind, connections) = match o.kind {
        LoadKind::Rate => ("rate", None),
        LoadKind::ConnRate { requests_per_conn } => (
            "conn_rate",
            Some(ConnRateDoc {
                requests_per_conn,
                started: s.started,
                completed: s.conns_completed,
                ended_early: s.conns_ended_early,
                failed: s.conns_failed,
                unfinished: s.conns_unfinished,
                lifetime: latency_doc(&s.lifetime),
            }),
        ),
    };
    OpenLoopDoc {
        kind: kind.into(),
        arrival: o.arrival.name().into(),
        seed: h.seed,
        asked_rate_per_s: asked,
        achieved_rate_per_s: achieved,
        intended: s.intended,
        started: s.started,
        late: s.late,
        late_threshold_us: LATE_THRESHOLD.as_micros() as u64,
        dropped: s.dropped(),
        dropped_overflow: s.dropped_overflow,
        dropped_unsent: s.dropped_unsent,
        rate_not_met: !reasons.is_empty(),
        rate_not_met_reasons: reasons,
        latency_uncorrected: Latency {
            censored: Some(s.uncorrected_censored),
            ..latency_doc(&s.uncorrected)
        },
        schedule_lag: lag,
        spin_us: s.spin.as_micros() as u64,
        spin_auto: s.spin_auto.map(|a| SpinAutoDoc {
            timer_lag_p99_us: a.timer_lag_p99.as_micros() as u64,
            send_gap_us: a.send_gap.as_micros() as u64,
            widened: a.widened,
        }),
        spin_wait_s: s.spin_wait.as_secs_f64(),
        connections,
    }
}

/// `--hlog FILE`: the document's interval histograms as an HdrHistogram interval log (the format
/// of Java's HistogramLogWriter: StartTime/BaseTime headers, one line per interval with a V2
/// compressed histogram), readable by HistogramLogProcessor, HdrHistogram's plotters and
/// `hdrh.log.HistogramLogReader`. Values are microseconds.
pub fn write_hlog(path: &std::path::Path, doc: &Document) -> Result<(), String> {
    use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
    let fail = |e: String| format!("--hlog {}: {e}", path.display());
    let mut bytes: Vec<u8> = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    let mut builder = IntervalLogWriterBuilder::new();
    builder
        .add_comment(&format!("netarena-load {} {}", doc.mode, doc.config.target))
        .add_comment(if doc.latency_corrected {
            "latency in microseconds, corrected: from each request's intended send time"
        } else {
            "latency in microseconds, from each request's send"
        })
        .with_start_time(doc.started_at_wall)
        .with_base_time(doc.started_at_wall);
    let mut w = builder
        .begin_log_with(&mut bytes, &mut ser)
        .map_err(|e| fail(e.to_string()))?;
    let interval = Duration::from_secs_f64(doc.intervals.interval_s);
    for e in &doc.intervals.entries {
        let h = decode_histogram(&e.data).map_err(fail)?;
        w.write_histogram(&h, Duration::from_secs_f64(e.t_s), interval, None)
            .map_err(|e| fail(format!("{e:?}")))?;
    }
    drop(w);
    std::fs::write(path, bytes).map_err(|e| fail(e.to_string()))
}

/// A histogram of the document (`HistogramDoc::data`, an interval's `data`) back from its base64 V2
/// encoding.
pub fn decode_histogram(data: &str) -> Result<Histogram<u64>, String> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| e.to_string())?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut &raw[..])
        .map_err(|e| format!("{e:?}"))
}

/// Every interval of the measured phase, empty ones included.
pub fn intervals_doc(
    done: &[(u64, Vec<u8>)],
    interval: Duration,
    duration: Duration,
) -> IntervalsDoc {
    let n = (duration.as_nanos()).div_ceil(interval.as_nanos().max(1)) as u64;
    let hists = stats::merge_intervals(&[done], n);
    IntervalsDoc {
        interval_s: secs(interval),
        encoding: "hdrhistogram-v2-deflate-base64".into(),
        unit: "us".into(),
        entries: hists
            .iter()
            .enumerate()
            .map(|(i, h)| interval_entry(i as f64 * secs(interval), h))
            .collect(),
    }
}

/// The entry of `intervals` for the interval starting at `t_s` whose latencies `h` holds.
pub fn interval_entry(t_s: f64, h: &Histogram<u64>) -> IntervalEntry {
    let l = latency_doc(h);
    IntervalEntry {
        t_s,
        count: l.count,
        p50_us: l.p50_us,
        p99_us: l.p99_us,
        p99_9_us: l.p99_9_us,
        max_us: l.max_us,
        data: l.histogram.data,
    }
}

/// What the load threads' clocks say over the measured phase.
struct GeneratorCpu {
    user_s: f64,
    sys_s: f64,
    /// Mean and busiest thread's busy fraction.
    busy: f64,
    busy_max: f64,
    /// Summed, and the largest thread's share of its wall time; None without schedstat.
    run_delay_s: Option<f64>,
    run_delay_max: Option<f64>,
}

fn generator_cpu(threads: &[ThreadSummary]) -> GeneratorCpu {
    // Busy is CPU time plus the time spent runnable but waiting for a CPU: a thread whose pinned
    // CPU another process holds shows little CPU time, yet could not send more either, so its
    // result is as much a lower bound on the server as that of a thread using the CPU.
    let busy_time = |t: &ThreadSummary| t.cpu_time + t.run_delay.unwrap_or_default();
    let (busy, busy_max) = busy_fractions(threads.iter().map(|t| (busy_time(t), t.wall_time)));
    // Unknown for one thread (no schedstat) is unknown for the generator.
    let run_delay: Option<Vec<Duration>> = threads.iter().map(|t| t.run_delay).collect();
    GeneratorCpu {
        user_s: threads.iter().map(|t| secs(t.user_time)).sum(),
        sys_s: threads.iter().map(|t| secs(t.sys_time)).sum(),
        busy,
        busy_max,
        run_delay_s: run_delay.as_ref().map(|d| secs(d.iter().sum())),
        run_delay_max: run_delay
            .map(|d| busy_fractions(d.into_iter().zip(threads).map(|(d, t)| (d, t.wall_time))).1),
    }
}

/// A run is generator-bound when its busiest load thread was busy `SATURATION_BUSY_FRACTION` of
/// the time or more: then its figures measure netarena-load, not the server.
fn is_saturated(busy_max: f64) -> bool {
    busy_max >= SATURATION_BUSY_FRACTION
}

/// (mean, max) of part / wall over threads given as (a part of their time, wall time), capped at 1;
/// threads that never measured (zero wall time) are left out; (0, 0) when none did.
fn busy_fractions(threads: impl Iterator<Item = (Duration, Duration)>) -> (f64, f64) {
    let fractions: Vec<f64> = threads
        .filter(|(_, wall)| !wall.is_zero())
        .map(|(cpu, wall)| (secs(cpu) / secs(wall)).min(1.0))
        .collect();
    if fractions.is_empty() {
        return (0.0, 0.0);
    }
    let mean = fractions.iter().sum::<f64>() / fractions.len() as f64;
    let max = fractions.iter().copied().fold(0.0, f64::max);
    (mean, max)
}

#[cfg(test)]
mod tests {
    #[test]
    fn achieved_rate_counts_only_sends_started_in_the_schedule() {
        let mut s = crate::load::open::OpenStats::new();
        s.intended = 20_000;
        // Half went out on time; the other half were caught up in the drain.
        s.started = 20_000;
        s.started_in_schedule = 10_000;
        assert_eq!(achieved_rate(&s, Duration::from_secs(2)), 5_000.0);
        assert_eq!(achieved_rate(&s, Duration::ZERO), 0.0);
    }

    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn one_saturated_thread_among_idle_ones_is_saturation() {
        // -t 2: one thread at 100%, one at 40%. The mean (70%) is under the bar; the busiest is not.
        let (mean, max) = busy_fractions([(ms(1000), ms(1000)), (ms(400), ms(1000))].into_iter());
        assert!((mean - 0.7).abs() < 1e-9, "{mean}");
        assert!((max - 1.0).abs() < 1e-9, "{max}");
        assert!(mean < SATURATION_BUSY_FRACTION && max >= SATURATION_BUSY_FRACTION);
    }

    #[test]
    fn saturation_starts_at_ninety_percent_busy() {
        // Written out, not derived from the constant: moving the bar must fail here.
        for (busy_max, saturated) in [
            (0.0, false),
            (0.89, false),
            (0.8999, false),
            (0.90, true),
            (0.91, true),
            (1.0, true),
        ] {
            assert_eq!(is_saturated(busy_max), saturated, "busy {busy_max}");
        }
        let (_, max) = busy_fractions([(ms(890), ms(1000)), (ms(500), ms(1000))].into_iter());
        assert!(!is_saturated(max), "{max}");
        let (_, max) = busy_fractions([(ms(500), ms(1000)), (ms(910), ms(1000))].into_iter());
        assert!(is_saturated(max), "{max}");
    }

    #[test]
    fn busy_fractions_cap_at_one_and_skip_unmeasured_threads() {
        // CPU time can exceed wall time by clock granularity; a thread that never reached the
        // measured phase has zero wall time and must not drag the mean down.
        let (mean, max) =
            busy_fractions([(ms(1010), ms(1000)), (ms(0), ms(0)), (ms(500), ms(1000))].into_iter());
        assert!((mean - 0.75).abs() < 1e-9, "{mean}");
        assert!((max - 1.0).abs() < 1e-9, "{max}");
        assert_eq!(busy_fractions(std::iter::empty()), (0.0, 0.0));
        let (mean, max) = busy_fractions([(ms(890), ms(1000)), (ms(850), ms(1000))].into_iter());
        assert!(max < SATURATION_BUSY_FRACTION, "{mean} {max}");
    }

    fn thread(cpu: u64, run_delay: Option<u64>, wall: u64) -> ThreadSummary {
        ThreadSummary {
            cpu: Some(1),
            cpu_time: ms(cpu),
            wall_time: ms(wall),
            user_time: ms(cpu / 4),
            sys_time: ms(cpu - cpu / 4),
            run_delay: run_delay.map(ms),
            batching: None,
        }
    }

    #[test]
    fn waiting_for_a_cpu_counts_as_busy() {
        // A thread sharing its pinned CPU with a hog: 450 ms on the CPU, 500 ms waiting for it.
        // CPU time alone (45%) is far under the bar; busy (95%) is over it.
        let g = generator_cpu(&[thread(450, Some(500), 1000)]);
        assert!((g.busy_max - 0.95).abs() < 1e-9, "{}", g.busy_max);
        assert!(is_saturated(g.busy_max));
        assert_eq!(g.run_delay_s, Some(0.5));
        assert_eq!(g.run_delay_max, Some(0.5));
        assert!((g.user_s + g.sys_s - 0.45).abs() < 1e-9);
        // The bar itself, with the wait making the difference: 89% and 91% busy.
        assert!(!is_saturated(
            generator_cpu(&[thread(390, Some(500), 1000)]).busy_max
        ));
        assert!(is_saturated(
            generator_cpu(&[thread(410, Some(500), 1000)]).busy_max
        ));
        // Capped at 1: CPU and wait are read at slightly different instants than the wall clock.
        assert_eq!(generator_cpu(&[thread(600, Some(450), 1000)]).busy_max, 1.0);
    }

    #[test]
    fn run_delay_is_per_thread_and_unknown_when_any_thread_lacks_it() {
        // -t 2: the busiest by busy time is the one that waited, not the one with more CPU time.
        let g = generator_cpu(&[thread(700, Some(50), 1000), thread(300, Some(650), 1000)]);
        assert!((g.busy_max - 0.95).abs() < 1e-9 && (g.busy - 0.85).abs() < 1e-9);
        assert_eq!(g.run_delay_s, Some(0.7));
        assert_eq!(g.run_delay_max, Some(0.65));
        // Without schedstat: CPU time only, and the document says so (null, not 0).
        let g = generator_cpu(&[thread(450, None, 1000), thread(300, Some(650), 1000)]);
        assert_eq!((g.run_delay_s, g.run_delay_max), (None, None));
        assert!(
            (g.busy_max - 0.95).abs() < 1e-9,
            "the thread with schedstat still counts it"
        );
        let g = generator_cpu(&[thread(450, None, 1000)]);
        assert!((g.busy_max - 0.45).abs() < 1e-9 && !is_saturated(g.busy_max));
    }
}
