//! The human summary of a result document (wrk-like, for a terminal): what `--json` does not print,
//! in words, with the hints a reader needs (saturation, the spin window, the thresholds' verdicts).

use crate::load::open::LATE_THRESHOLD;
use crate::parse::{fmt_bytes, fmt_us};
use crate::result::document::{
    Document, SpinAutoDoc, NOTABLE_RUN_DELAY_FRACTION, SATURATION_BUSY_FRACTION,
};
use crate::result::thresholds;

/// What `--spin-us auto` found and did, in words.
fn spin_auto_says(a: &SpinAutoDoc, spin_us: u64) -> String {
    if a.widened {
        format!(
            "this machine's timer wakes the load thread {} late at p99, more than {:.0}% of the {} between its sends: too coarse for this rate, so the window was widened to {} (up to a core per thread)",
            fmt_us(a.timer_lag_p99_us),
            crate::config::AUTO_SPIN_LAG_SHARE * 100.0,
            fmt_us(a.send_gap_us),
            fmt_us(spin_us)
        )
    } else {
        format!(
            "timer wake-up lag p99 {}, under {:.0}% of the {} between sends: the default window kept",
            fmt_us(a.timer_lag_p99_us),
            crate::config::AUTO_SPIN_LAG_SHARE * 100.0,
            fmt_us(a.send_gap_us)
        )
    }
}

/// Below this schedule-lag p99 there is nothing worth a spinning core (the open loop's precision goal, 50 µs; bench/open_loop_precision.py).
const SPIN_HINT_ABOVE_US: u64 = 50;

/// A sleeping thread's schedule lag p99 between `SPIN_HINT_ABOVE_US` and `LATE_THRESHOLD` is the
/// machine's timer wake-up lag, which a `--spin-us` window of about twice that busy-polls through.
/// Above `LATE_THRESHOLD` the thread was waiting for a CPU (other work), which spinning makes worse.
fn spin_hint(lag_p99_us: u64, spin_us: u64) -> Option<String> {
    let late_us = LATE_THRESHOLD.as_micros() as u64;
    if lag_p99_us <= SPIN_HINT_ABOVE_US || lag_p99_us > late_us || spin_us >= lag_p99_us {
        return None;
    }
    let window = (2 * lag_p99_us).div_ceil(100) * 100;
    let window = window.min(crate::config::MAX_SPIN_US);
    Some(format!(
        "a lag p99 of {} is typically this machine's timer waking the sleeping thread late; --spin-us {window} busy-polls through that for a lag of a few µs, at up to a core per thread (give the generator its own CPUs)",
        fmt_us(lag_p99_us)
    ))
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
    o += &format!(", io {}", c.io_backend);
    if c.coalesce == "auto" {
        o += " (coalesce auto)";
    } else if c.coalesce_us > 0 {
        o += &format!(" (coalesce {}us)", c.coalesce_us);
    }
    o += "\n";
    o += &format!("  Engine: {}\n", c.io_reason);
    if doc.interrupted {
        o += &format!(
            "  INTERRUPTED: stopped by a signal after {:.2}s; the figures below cover only that part of the run\n",
            doc.duration_s
        );
    }
    let l = &doc.latency;
    if doc.latency_corrected {
        o += "  Latency is corrected: counted from each request's intended send time (no coordinated omission)\n";
    }
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
    if let Some(n) = l.censored.filter(|&n| n > 0) {
        o += &format!(
            "              percentiles include {n} censored lower bound(s): requests unanswered at the end, entered with the time they had waited\n"
        );
    }
    if let Some(ol) = &doc.open_loop {
        let u = &ol.latency_uncorrected;
        o += &format!(
            "  Uncorrected p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  (from the actual send)\n",
            fmt_us(u.p50_us),
            fmt_us(u.p90_us),
            fmt_us(u.p99_us),
            fmt_us(u.p99_9_us),
            fmt_us(u.max_us)
        );
        let what = if ol.kind == "rate" {
            "requests"
        } else {
            "connections"
        };
        let asked = ol
            .asked_rate_per_s
            .map_or("(sweep)".to_string(), |r| format!("{r}"));
        o += &format!(
            "  Schedule    {} {what}/s asked, {:.1}/s started ({}), lag p50 {} p99 {} max {}, late {} (> {}), dropped {}\n",
            asked,
            ol.achieved_rate_per_s,
            ol.arrival,
            fmt_us(ol.schedule_lag.p50_us),
            fmt_us(ol.schedule_lag.p99_us),
            fmt_us(ol.schedule_lag.max_us),
            ol.late,
            fmt_us(ol.late_threshold_us),
            ol.dropped
        );
        o += &format!(
            "  Spin-wait   busy-polls when a send is {} away or less; {:.2} s spent so (not counted as busy)\n",
            fmt_us(ol.spin_us),
            ol.spin_wait_s
        );
        if let Some(a) = &ol.spin_auto {
            o += &format!("  Spin auto   {}\n", spin_auto_says(a, ol.spin_us));
        }
        if let Some(hint) = spin_hint(ol.schedule_lag.p99_us, ol.spin_us) {
            o += &format!("  Hint        {hint}\n");
        }
        if let Some(c) = &ol.connections {
            o += &format!(
                "  Connections {} started, {} completed {} request(s) each, {} ended early by the server, {} failed, {} unfinished; lifetime p50 {} p99 {}\n",
                c.started,
                c.completed,
                c.requests_per_conn,
                c.ended_early,
                c.failed,
                c.unfinished,
                fmt_us(c.lifetime.p50_us),
                fmt_us(c.lifetime.p99_us)
            );
        }
        if ol.rate_not_met {
            o += "  WARNING: RATE NOT MET: the generator did not keep the asked schedule; the latencies above are for a lighter load than asked.\n";
            for r in &ol.rate_not_met_reasons {
                o += &format!("           {r}\n");
            }
        }
    }
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
    if doc.totals.unfinished > 0 {
        o += &format!(
            "  Unfinished  {} {unit} still unanswered at the end (not counted as errors)\n",
            doc.totals.unfinished
        );
    }
    let na = &doc.no_answer;
    if na.flagged {
        o += &format!(
            "  WARNING: NO ANSWER: {} of {} connections ({:.1}%, flagged at >= {:.0}%) got no answer during the measured phase.\n           The server left them waiting: the throughput and latencies above are those of the connections it served.\n",
            na.connections,
            na.of_connections,
            na.fraction * 100.0,
            na.flag_fraction * 100.0
        );
    }
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
    if let Some(t) = &doc.tls {
        let unknown = || "?".to_string();
        o += &format!(
            "  TLS         {} {} ALPN {}, {} handshakes ({} resumed{}){}\n",
            t.version.clone().unwrap_or_else(unknown),
            t.cipher_suite.clone().unwrap_or_else(unknown),
            t.alpn.clone().unwrap_or_else(|| "none".into()),
            t.handshakes,
            t.resumed,
            if t.resume { "" } else { "; --tls-resume off" },
            if t.certificate_verified {
                ""
            } else {
                ", certificate NOT verified (--insecure)"
            }
        );
    }
    if let Some(h) = &doc.http2 {
        o += &format!(
            "  HTTP/2      {}, {} stream(s) per connection, window {} bytes, {} GOAWAY(s)\n",
            h.protocol, h.streams, h.window, h.goaways
        );
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
    if let Some(steps) = &doc.steps {
        let verdicts = doc.find_max.as_ref().map(|f| &f.verdicts);
        o += "  Steps       asked/s   achieved/s   p50        p99        p99.9      errors   verdict\n";
        for (k, st) in steps.iter().enumerate() {
            let ol = st.open_loop.as_ref().expect("steps are open-loop");
            let verdict = match verdicts.and_then(|v| v.get(k)) {
                Some(v) if v.passed => "pass".to_string(),
                Some(v) => format!("FAIL: {}", v.reasons.join("; ")),
                None if ol.rate_not_met => "RATE NOT MET".to_string(),
                None => String::new(),
            };
            o += &format!(
                "              {:<9} {:<12.1} {:<10} {:<10} {:<10} {:<8} {}\n",
                ol.asked_rate_per_s.unwrap_or(0.0),
                ol.achieved_rate_per_s,
                fmt_us(st.latency.p50_us),
                fmt_us(st.latency.p99_us),
                fmt_us(st.latency.p99_9_us),
                st.errors.total,
                verdict
            );
        }
    }
    if let Some(f) = &doc.find_max {
        match f.found_rate_per_s {
            Some(r) => {
                o += &format!(
                    "  Found max   {r}/s meets {} with errors <= {:.3}% ({})\n",
                    f.slo,
                    f.max_errors_fraction * 100.0,
                    f.stopped_because
                )
            }
            None => o += &format!("  Found max   none: {}\n", f.stopped_because),
        }
    }
    for (k, t) in doc.thresholds.iter().enumerate() {
        let verdict = if t.pass { "PASS" } else { "FAIL" };
        let measured = t.measured.map_or("nothing to judge".to_string(), |m| {
            format!("measured {}", thresholds::describe(&t.unit, m))
        });
        let label = if k == 0 { "Thresholds" } else { "" };
        o += &format!("  {label:<11} {verdict} {} ({measured})\n", t.expr);
    }
    let g = &doc.generator;
    o += &format!(
        "  Generator   cpu user {:.2}s sys {:.2}s, threads busy {:.0}% (busiest {:.0}%)\n",
        g.cpu_user_s,
        g.cpu_sys_s,
        g.busy_fraction * 100.0,
        g.busy_fraction_max * 100.0
    );
    let cpu_wait = g
        .run_delay_fraction_max
        .filter(|&f| f >= NOTABLE_RUN_DELAY_FRACTION);
    match (g.busy_counts_run_delay, cpu_wait) {
        (false, _) => o += "  CPU wait    not seen: this kernel keeps no /proc/thread-self/schedstat, so busy is CPU time only\n",
        (true, Some(f)) => o += &format!(
            "  CPU wait    the busiest thread waited for a CPU {:.0}% of the time (counted as busy): other work shares the generator's CPUs\n",
            f * 100.0
        ),
        (true, None) => {}
    }
    if g.saturated {
        o += &format!(
            "  WARNING: the generator was saturated (a thread busy {:.0}% >= {:.0}%): these numbers measure netarena-load, not the server.\n           {}\n",
            g.busy_fraction_max * 100.0,
            SATURATION_BUSY_FRACTION * 100.0,
            if cpu_wait.is_some() {
                "It waited for a CPU: give it CPUs of its own (--cpus) that nothing else runs on."
            } else {
                "Give it more threads/CPUs."
            }
        );
    }
    o
}

#[cfg(test)]
mod tests {
    #[test]
    fn spin_hint_only_for_a_timer_sized_lag_not_covered_by_the_window() {
        let hint = super::spin_hint(130, 20).expect("timer-sized lag, default window");
        assert!(hint.contains("--spin-us 300"), "{hint}");
        assert!(hint.contains("130us"), "{hint}");
        assert_eq!(super::spin_hint(40, 20), None, "within the goal");
        assert_eq!(
            super::spin_hint(3000, 20),
            None,
            "a CPU wait, not the timer"
        );
        assert_eq!(
            super::spin_hint(130, 500),
            None,
            "already spinning through it"
        );
    }
}
