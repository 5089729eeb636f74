//! The result document (docs/load-generator.md, docs/schema/netarena-load.schema.json) and the
//! human summary; both are pure functions of the configuration and the measurements.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::config::{Config, Mode};
use crate::echo::ProbeResult;
use crate::http::hex;
use crate::run::RunOutcome;
use crate::stats::{self, ErrorClass};
use crate::sys::rfc3339_utc;

pub const SCHEMA_VERSION: u32 = 1;
/// Threads busy at least this fraction of the measured time mean the generator was the bottleneck.
pub const SATURATION_BUSY_FRACTION: f64 = 0.90;

#[derive(Serialize)]
pub struct Document {
    pub schema_version: u32,
    pub tool: Tool,
    pub mode: &'static str,
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
    pub echo: Option<EchoDoc>,
}

#[derive(Serialize)]
pub struct Tool {
    pub name: &'static str,
    pub version: &'static str,
}

#[derive(Serialize)]
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
    pub bytes_per_connection: Option<u64>,
    pub chunk_bytes: Option<u64>,
    pub probe_interval_s: Option<f64>,
    pub io_backend: &'static str,
    pub coalesce_us: u32,
}

#[derive(Serialize)]
pub struct Totals {
    pub requests: u64,
    pub responses: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub connections_opened: u64,
    pub errors: u64,
}

#[derive(Serialize)]
pub struct Throughput {
    pub requests_per_s: f64,
    pub bytes_per_s: f64,
}

#[derive(Serialize)]
pub struct Latency {
    pub count: u64,
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

#[derive(Serialize)]
pub struct HistogramDoc {
    pub encoding: &'static str,
    pub unit: &'static str,
    pub lowest_trackable: u64,
    pub highest_trackable: u64,
    pub significant_digits: u8,
    pub data: String,
}

#[derive(Serialize)]
pub struct TimelineEntry {
    pub t_s: f64,
    pub requests: u64,
    pub bytes_received: u64,
    pub errors: u64,
}

#[derive(Serialize)]
pub struct Errors {
    pub total: u64,
    pub by_class: BTreeMap<&'static str, u64>,
    pub status_codes: BTreeMap<String, u64>,
    pub examples: Vec<String>,
}

#[derive(Serialize)]
pub struct Generator {
    pub threads: usize,
    pub cpus: Vec<usize>,
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    pub busy_fraction: f64,
    pub saturated: bool,
}

#[derive(Serialize)]
pub struct EchoDoc {
    pub bytes_per_connection: Option<u64>,
    pub chunk_bytes: u64,
    pub connections_completed: u64,
    pub completion_time_s: Option<f64>,
    pub verified_bytes: u64,
    pub probe: Option<ProbeDoc>,
}

#[derive(Serialize)]
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
            encoding: "hdrhistogram-v2-deflate-base64",
            unit: "us",
            lowest_trackable: stats::HIST_LOWEST_US,
            highest_trackable: stats::HIST_HIGHEST_US,
            significant_digits: stats::HIST_SIGFIG,
            data: base64::engine::general_purpose::STANDARD.encode(&bytes),
        },
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
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

    let (user, sys, busy) = generator_cpu(run);
    let saturated = busy >= SATURATION_BUSY_FRACTION;
    let by_class = ErrorClass::ALL
        .iter()
        .map(|&c| (c.name(), s.errors[c as usize]))
        .collect();
    let examples = s.examples.clone();

    let (http, echo_cfg) = match &cfg.mode {
        Mode::Http(h) => (Some(h), None),
        Mode::Echo(e) => (None, Some(e)),
    };
    let config = ConfigDoc {
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
        bytes_per_connection: echo_cfg.and_then(|e| e.bytes_per_connection),
        chunk_bytes: echo_cfg.map(|e| e.chunk_bytes),
        probe_interval_s: echo_cfg.and_then(|e| e.probe_interval.map(secs)),
        io_backend: cfg.io.name(),
        coalesce_us: cfg.coalesce_us,
    };

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
            name: "netarena-load",
            version: env!("CARGO_PKG_VERSION"),
        },
        mode: cfg.mode_name(),
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
        },
        throughput: Throughput {
            requests_per_s: per_s(s.requests),
            bytes_per_s: per_s(s.bytes_received),
        },
        latency: latency_doc(&s.hist),
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
            cpu_user_s: user,
            cpu_sys_s: sys,
            busy_fraction: busy,
            saturated,
        },
        generator_saturated: saturated,
        echo,
    }
}

/// (user s, system s, mean busy fraction) of the load threads over the measured phase.
fn generator_cpu(run: &RunOutcome) -> (f64, f64, f64) {
    let user = run.threads.iter().map(|t| secs(t.user_time)).sum();
    let sys = run.threads.iter().map(|t| secs(t.sys_time)).sum();
    let fractions: Vec<f64> = run
        .threads
        .iter()
        .filter(|t| !t.wall_time.is_zero())
        .map(|t| (secs(t.cpu_time) / secs(t.wall_time)).min(1.0))
        .collect();
    let busy = if fractions.is_empty() {
        0.0
    } else {
        fractions.iter().sum::<f64>() / fractions.len() as f64
    };
    (user, sys, busy)
}

fn fmt_us(us: u64) -> String {
    match us {
        0..=999 => format!("{us}us"),
        1000..=999_999 => format!("{:.2}ms", us as f64 / 1e3),
        _ => format!("{:.2}s", us as f64 / 1e6),
    }
}

fn fmt_bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.2} {}", UNITS[u])
}

/// wrk-like summary for a terminal.
pub fn human(doc: &Document) -> String {
    let mut o = String::new();
    let c = &doc.config;
    o += &format!("netarena-load {} {}\n", doc.mode, c.target);
    o += &format!(
        "  {} thread(s), {} connection(s), measured {:.2}s",
        c.threads, c.connections, doc.duration_s
    );
    if doc.warmup_s > 0.0 {
        o += &format!(" after {:.2}s warm-up", doc.warmup_s);
    }
    if c.io_backend != "epoll" {
        o += &format!(", io {}", c.io_backend);
        if c.coalesce_us > 0 {
            o += &format!(" (coalesce {}us)", c.coalesce_us);
        }
    }
    o += "\n";
    let l = &doc.latency;
    o += &format!(
        "  Latency     p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  (mean {} ± {})\n",
        fmt_us(l.p50_us),
        fmt_us(l.p90_us),
        fmt_us(l.p99_us),
        fmt_us(l.p99_9_us),
        fmt_us(l.max_us),
        fmt_us(l.mean_us as u64),
        fmt_us(l.stdev_us as u64)
    );
    let unit = if doc.mode == "echo" {
        "chunks"
    } else {
        "requests"
    };
    o += &format!(
        "  Throughput  {:.1} {unit}/s ({} ok of {} responses), {}/s received\n",
        doc.throughput.requests_per_s,
        doc.totals.requests,
        doc.totals.responses,
        fmt_bytes(doc.throughput.bytes_per_s)
    );
    if let Some(e) = &doc.echo {
        o += &format!(
            "  Echo        {} verified",
            fmt_bytes(e.verified_bytes as f64)
        );
        if let Some(b) = e.bytes_per_connection {
            o += &format!(
                ", {} of {} connections completed {} each",
                e.connections_completed,
                c.connections,
                fmt_bytes(b as f64)
            );
        }
        o += "\n";
        if let Some(p) = &e.probe {
            o += &format!(
                "  Probe       {} of {} completed, p50 {}  p99 {}  max {}\n",
                p.completed,
                p.attempts,
                fmt_us(p.latency.p50_us),
                fmt_us(p.latency.p99_us),
                fmt_us(p.latency.max_us)
            );
        }
    }
    if doc.errors.total > 0 {
        let classes: Vec<String> = doc
            .errors
            .by_class
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        o += &format!(
            "  Errors      {} ({})\n",
            doc.errors.total,
            classes.join(", ")
        );
        if !doc.errors.status_codes.is_empty() {
            let codes: Vec<String> = doc
                .errors
                .status_codes
                .iter()
                .map(|(k, n)| format!("{k}: {n}"))
                .collect();
            o += &format!("              status codes {}\n", codes.join(", "));
        }
        for e in &doc.errors.examples {
            o += &format!("              e.g. {e}\n");
        }
    }
    let g = &doc.generator;
    o += &format!(
        "  Generator   cpu user {:.2}s sys {:.2}s, threads busy {:.0}%\n",
        g.cpu_user_s,
        g.cpu_sys_s,
        g.busy_fraction * 100.0
    );
    if g.saturated {
        o += &format!(
            "  WARNING: the generator was saturated (threads busy {:.0}% >= {:.0}%): these numbers measure netarena-load, not the server.\n           Give it more threads/CPUs.\n",
            g.busy_fraction * 100.0,
            SATURATION_BUSY_FRACTION * 100.0
        );
    }
    o
}
