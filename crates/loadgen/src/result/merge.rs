//! `netarena-load merge`: the result documents of one measurement, each from a generator process
//! that took a share of it (a level spread over several processes on one machine, or over several
//! hosts), made into one document of the same schema, so that every reader of a run's `--json`
//! reads the merged one as it is.
//!
//! The parts measured the same phase: they were started with `--prepare` and given one start time,
//! so interval i and second i of every part cover the same span of time, and their rates add up.
//! Counts and byte totals are summed, rates summed, latencies recomputed from the merged
//! HdrHistograms (never averaged percentiles), errors summed by class. Settings every part ran with
//! alike (the engine, the thread count of each process, the histogram range) are the first part's.
//!
//! `merge_documents` builds every block of `Document` field by field: a field added to the
//! document does not compile here until it has a rule. Input that cannot be merged (another
//! schema version, mode or histogram range, sweeps of different lengths, a `--find-max` search of
//! several parts) is refused by `check_part`, naming the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;

use crate::result::document::{
    self, ConfigDoc, ConnRateDoc, Document, EchoDoc, Errors, Generator, HistogramDoc, Http2Doc,
    IntervalEntry, IntervalsDoc, Latency, NoAnswerDoc, OpenLoopDoc, ProbeDoc, SpinAutoDoc,
    ThresholdDoc, Throughput, TimelineEntry, TlsDoc, Totals, SCHEMA_VERSION,
};
use crate::result::thresholds;
use crate::stats::MAX_ERROR_EXAMPLES;

/// One input document and the name its part goes by where the merge needs names (the reasons an
/// open-loop rate was not met are each one part's).
pub struct Part {
    pub label: String,
    pub doc: Document,
}

/// `netarena-load merge [--label NAME]... FILE...`: the files read, checked and merged. The error
/// names the file and what is wrong with it.
pub fn merge_files(files: &[PathBuf], labels: &[String]) -> Result<Document, String> {
    if files.is_empty() {
        return Err("merge needs at least one result document".into());
    }
    if labels.len() > files.len() {
        return Err(format!(
            "{} --label for {} file(s): one label per file, in the order of the files",
            labels.len(),
            files.len()
        ));
    }
    let mut parts = Vec::with_capacity(files.len());
    for (i, path) in files.iter().enumerate() {
        let doc = read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let label = labels
            .get(i)
            .cloned()
            .unwrap_or_else(|| path.display().to_string());
        parts.push(Part { label, doc });
    }
    for (path, part) in files.iter().zip(&parts).skip(1) {
        check_part(&parts[0].doc, &part.doc, parts.len())
            .map_err(|e| format!("{}: {e} (in {})", path.display(), files[0].display()))?;
    }
    if parts.len() > 1 && parts[0].doc.find_max.is_some() {
        return Err(format!("{}: {}", files[0].display(), FIND_MAX_REFUSED));
    }
    merge_documents(&parts)
}

const FIND_MAX_REFUSED: &str = "a --find-max search cannot be merged with another part: each part searched a rate of its own, and no one highest rate comes of that (run the search in one process)";

/// One file as a result document of this schema version.
pub fn read(path: &Path) -> Result<Document, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))?;
    let Some(version) = value
        .get("schema_version")
        .filter(|_| value.get("tool").is_some())
    else {
        return Err("not a netarena-load result document (no schema_version and tool)".into());
    };
    if version.as_u64() != Some(u64::from(SCHEMA_VERSION)) {
        return Err(format!(
            "schema_version {version}: this netarena-load reads schema_version {SCHEMA_VERSION}"
        ));
    }
    serde_json::from_value(value)
        .map_err(|e| format!("not a complete netarena-load result document: {e}"))
}

/// Whether `doc` can be merged with `first` (the first file's): the same kind of measurement, with
/// histograms of the same range and intervals of the same length; what differs is said in words.
fn check_part(first: &Document, doc: &Document, parts: usize) -> Result<(), String> {
    if doc.mode != first.mode {
        return Err(format!(
            "mode {}, not {} as in the first file",
            doc.mode, first.mode
        ));
    }
    if doc.open_loop.is_some() != first.open_loop.is_some() {
        let kind = |d: &Document| {
            if d.open_loop.is_some() {
                "an open-loop"
            } else {
                "a closed-loop"
            }
        };
        return Err(format!(
            "{} run, the first file {} one",
            kind(doc),
            kind(first)
        ));
    }
    let (a, b) = (&first.latency.histogram, &doc.latency.histogram);
    if (
        a.lowest_trackable,
        a.highest_trackable,
        a.significant_digits,
    ) != (
        b.lowest_trackable,
        b.highest_trackable,
        b.significant_digits,
    ) || a.encoding != b.encoding
        || a.unit != b.unit
    {
        return Err(format!(
            "histogram settings differ: lowest_trackable {}, highest_trackable {}, significant_digits {}, {} in {}; the first file has {}, {}, {}, {} in {}",
            b.lowest_trackable, b.highest_trackable, b.significant_digits, b.encoding, b.unit,
            a.lowest_trackable, a.highest_trackable, a.significant_digits, a.encoding, a.unit
        ));
    }
    // Interval i of every part must cover the same span for their histograms to be merged.
    if doc.intervals.interval_s != first.intervals.interval_s {
        return Err(format!(
            "intervals of {} s, the first file's of {} s",
            doc.intervals.interval_s, first.intervals.interval_s
        ));
    }
    let steps = |d: &Document| d.steps.as_ref().map(Vec::len);
    if steps(doc) != steps(first) {
        let say =
            |n: Option<usize>| n.map_or("no --steps sweep".to_string(), |n| format!("{n} steps"));
        return Err(format!(
            "{}, the first file {}: step i of every part must be the same rate's share",
            say(steps(doc)),
            say(steps(first))
        ));
    }
    if parts > 1 && doc.find_max.is_some() {
        return Err(FIND_MAX_REFUSED.into());
    }
    for (a, b) in first.steps.iter().flatten().zip(doc.steps.iter().flatten()) {
        check_part(a, b, parts)?;
    }
    Ok(())
}

/// One document from `parts` (checked alike by `check_part`): every block by its own rule.
pub fn merge_documents(parts: &[Part]) -> Result<Document, String> {
    let docs: Vec<&Document> = parts.iter().map(|p| &p.doc).collect();
    let first = docs[0];
    // A --steps sweep: step i of every part is the same rate's share, measured together; each is
    // merged as a document of its own (checked to be as many in every part).
    let steps = match &first.steps {
        None => None,
        Some(own) => Some(
            (0..own.len())
                .map(|i| {
                    let step_parts: Vec<Part> = parts
                        .iter()
                        .map(|p| Part {
                            label: p.label.clone(),
                            doc: p.doc.steps.as_ref().expect("checked: every part has steps")[i]
                                .clone(),
                        })
                        .collect();
                    merge_documents(&step_parts)
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    let settings = &first.latency.histogram;
    let mut no_answer = merge_no_answer(&docs);
    if let Some(steps) = &steps {
        // A sweep is flagged when any of its steps is, as a sweep of one process is.
        no_answer.flagged = steps.iter().any(|s| s.no_answer.flagged);
    }
    let generator = merge_generator(&docs);
    let mut doc = Document {
        schema_version: first.schema_version,
        tool: first.tool.clone(),
        mode: first.mode.clone(),
        // The parts' command lines differ by their shares only; the first stands for them (the
        // orchestrator keeps every part's).
        command_line: first.command_line.clone(),
        config: merge_config(&docs),
        // The measurement spans every part's: from the earliest start to the latest end.
        started_at: docs
            .iter()
            .map(|d| &d.started_at)
            .min()
            .expect("one part")
            .clone(),
        ended_at: docs
            .iter()
            .map(|d| &d.ended_at)
            .max()
            .expect("one part")
            .clone(),
        duration_s: docs.iter().map(|d| d.duration_s).fold(0.0, f64::max),
        warmup_s: first.warmup_s,
        totals: merge_totals(&docs),
        throughput: merge_throughput(&docs),
        latency: merge_latency(&docs.iter().map(|d| &d.latency).collect::<Vec<_>>())?,
        timeline: merge_timeline(&docs),
        errors: merge_errors(&docs),
        // Saturated when any part was: that part's connections waited on its generator.
        generator_saturated: generator.saturated || docs.iter().any(|d| d.generator_saturated),
        generator,
        no_answer,
        echo: merge_echo(&docs)?,
        tls: merge_tls(&docs),
        http2: merge_http2(&docs),
        latency_corrected: first.latency_corrected,
        intervals: merge_intervals(&docs, settings)?,
        open_loop: merge_open_loop(parts)?,
        steps,
        // check_part refuses a search of more than one part: one part's is its own.
        find_max: first.find_max.clone(),
        // Part of the measurement was cut short: so was the measurement.
        interrupted: docs.iter().any(|d| d.interrupted),
        thresholds: Vec::new(),
        started_at_wall: docs
            .iter()
            .map(|d| d.started_at_wall)
            .min()
            .expect("one part"),
    };
    doc.thresholds = judge_again(&first.thresholds, &doc)?;
    Ok(doc)
}

/// The `--threshold` verdicts, judged again on the merged document: each part judged only its own
/// share of the load (its p99, its requests per second), which is no verdict on the measurement.
/// The expressions are the first part's (every part was given the same).
fn judge_again(verdicts: &[ThresholdDoc], doc: &Document) -> Result<Vec<ThresholdDoc>, String> {
    let parsed = verdicts
        .iter()
        .map(|t| crate::threshold::parse(&t.expr).map_err(|e| format!("threshold {}: {e}", t.expr)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(thresholds::evaluate(&parsed, doc))
}

/// The configuration: the shares of the load summed back into the whole (connections, `-n`, the
/// open-loop rates and a sweep's rates were split over the parts, so their sum is what was asked);
/// every other setting is the first part's, since every part ran with the same flags. Each part's
/// source addresses were its own: all of them, in order.
fn merge_config(docs: &[&Document]) -> ConfigDoc {
    let configs: Vec<&ConfigDoc> = docs.iter().map(|d| &d.config).collect();
    let first = configs[0];
    let sum_some = |f: fn(&ConfigDoc) -> Option<f64>| {
        f(first).map(|_| configs.iter().filter_map(|c| f(c)).sum())
    };
    let steps = first.steps.as_ref().map(|own| {
        (0..own.len())
            .map(|i| {
                configs
                    .iter()
                    .filter_map(|c| c.steps.as_ref().and_then(|s| s.get(i)))
                    .sum()
            })
            .collect()
    });
    let mut source_ips: Vec<String> = Vec::new();
    for ip in configs.iter().flat_map(|c| &c.source_ips) {
        if !source_ips.contains(ip) {
            source_ips.push(ip.clone());
        }
    }
    ConfigDoc {
        connections: configs.iter().map(|c| c.connections).sum(),
        requests: first
            .requests
            .map(|_| configs.iter().filter_map(|c| c.requests).sum()),
        rate: sum_some(|c| c.rate),
        conn_rate: sum_some(|c| c.conn_rate),
        steps,
        source_ips,
        ..first.clone()
    }
}

/// Every count summed: each part counted its own requests, bytes and connections.
fn merge_totals(docs: &[&Document]) -> Totals {
    let sum = |f: fn(&Totals) -> u64| docs.iter().map(|d| f(&d.totals)).sum();
    Totals {
        requests: sum(|t| t.requests),
        responses: sum(|t| t.responses),
        bytes_sent: sum(|t| t.bytes_sent),
        bytes_received: sum(|t| t.bytes_received),
        connections_opened: sum(|t| t.connections_opened),
        errors: sum(|t| t.errors),
        unfinished: sum(|t| t.unfinished),
        warmup_responses: sum(|t| t.warmup_responses),
    }
}

/// Rates summed: every part measured the same phase, started together, so the whole did the sum.
fn merge_throughput(docs: &[&Document]) -> Throughput {
    Throughput {
        requests_per_s: docs.iter().map(|d| d.throughput.requests_per_s).sum(),
        bytes_per_s: docs.iter().map(|d| d.throughput.bytes_per_s).sum(),
    }
}

/// The histogram holding every part's values, in the parts' range (checked to be one).
fn merged_histogram<'a>(
    settings: &HistogramDoc,
    data: impl IntoIterator<Item = &'a str>,
) -> Result<Histogram<u64>, String> {
    let mut merged = Histogram::new_with_bounds(
        settings.lowest_trackable,
        settings.highest_trackable,
        settings.significant_digits,
    )
    .map_err(|e| format!("histogram settings: {e:?}"))?;
    for d in data {
        let h = document::decode_histogram(d).map_err(|e| format!("a histogram: {e}"))?;
        merged
            .add(&h)
            .map_err(|e| format!("a histogram does not fit the range: {e:?}"))?;
    }
    Ok(merged)
}

/// A latency block from the parts' histograms merged: the percentiles of the whole are those of one
/// histogram holding every part's values, not an average of the parts' percentiles. Entries that
/// are lower bounds (censored) are summed, as they are counted in the histograms.
fn merge_latency(blocks: &[&Latency]) -> Result<Latency, String> {
    let settings = &blocks[0].histogram;
    let h = merged_histogram(settings, blocks.iter().map(|l| l.histogram.data.as_str()))?;
    let figures = document::latency_doc(&h);
    let censored = blocks
        .iter()
        .any(|l| l.censored.is_some())
        .then(|| blocks.iter().filter_map(|l| l.censored).sum());
    Ok(Latency {
        censored,
        histogram: HistogramDoc {
            data: figures.histogram.data.clone(),
            ..settings.clone()
        },
        ..figures
    })
}

/// The per-second timelines summed second by second (the parts started together).
fn merge_timeline(docs: &[&Document]) -> Vec<TimelineEntry> {
    let longest = docs.iter().map(|d| d.timeline.len()).max().unwrap_or(0);
    (0..longest)
        .map(|i| {
            let seconds: Vec<&TimelineEntry> =
                docs.iter().filter_map(|d| d.timeline.get(i)).collect();
            TimelineEntry {
                t_s: seconds[0].t_s,
                requests: seconds.iter().map(|s| s.requests).sum(),
                bytes_received: seconds.iter().map(|s| s.bytes_received).sum(),
                errors: seconds.iter().map(|s| s.errors).sum(),
            }
        })
        .collect()
}

/// Errors summed by class and by status code; the examples are the parts' distinct ones, as many
/// as one run keeps.
fn merge_errors(docs: &[&Document]) -> Errors {
    let mut by_class: BTreeMap<String, u64> = BTreeMap::new();
    let mut status_codes: BTreeMap<String, u64> = BTreeMap::new();
    for d in docs {
        for (k, n) in &d.errors.by_class {
            *by_class.entry(k.clone()).or_default() += n;
        }
        for (k, n) in &d.errors.status_codes {
            *status_codes.entry(k.clone()).or_default() += n;
        }
    }
    Errors {
        total: docs.iter().map(|d| d.errors.total).sum(),
        by_class,
        status_codes,
        examples: distinct_examples(docs.iter().map(|d| &d.errors.examples)),
    }
}

fn distinct_examples<'a>(lists: impl Iterator<Item = &'a Vec<String>>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in lists.flatten() {
        if out.len() < MAX_ERROR_EXAMPLES && !out.contains(e) {
            out.push(e.clone());
        }
    }
    out
}

/// The mean of the parts' values weighted by their threads, over the parts that have one; None if
/// none has. Every thread measured the same phase, so a thread-weighted mean is the mean over all
/// threads, as one process's busy fraction is.
fn thread_weighted(values: impl Iterator<Item = (Option<f64>, usize)>) -> Option<f64> {
    let known: Vec<(f64, usize)> = values.filter_map(|(v, n)| v.map(|v| (v, n))).collect();
    let threads: usize = known.iter().map(|(_, n)| n).sum();
    match known.as_slice() {
        [(v, _)] => Some(*v),
        _ if threads > 0 => {
            Some(known.iter().map(|(v, n)| v * *n as f64).sum::<f64>() / threads as f64)
        }
        _ => None,
    }
}

/// The generator over every part: CPU times and CPU waits summed, the busy fraction a mean
/// weighted by threads (its definition), the busiest thread's figures the maximum, saturated when
/// any part was. The CPU list is empty: CPU numbers of different hosts do not add up to a set (the
/// orchestrator keeps each part's own document).
fn merge_generator(docs: &[&Document]) -> Generator {
    let gens: Vec<&Generator> = docs.iter().map(|d| &d.generator).collect();
    let max = |f: fn(&Generator) -> f64| gens.iter().map(|g| f(g)).fold(0.0, f64::max);
    // Unknown for one part (no schedstat) is unknown for the whole, as for one thread.
    let run_delays: Option<Vec<f64>> = gens.iter().map(|g| g.run_delay_s).collect();
    let run_delay_max: Option<Vec<f64>> = gens.iter().map(|g| g.run_delay_fraction_max).collect();
    Generator {
        threads: gens.iter().map(|g| g.threads).sum(),
        cpus: Vec::new(),
        cpu_user_s: gens.iter().map(|g| g.cpu_user_s).sum(),
        cpu_sys_s: gens.iter().map(|g| g.cpu_sys_s).sum(),
        busy_fraction: thread_weighted(gens.iter().map(|g| (Some(g.busy_fraction), g.threads)))
            .unwrap_or(0.0),
        busy_fraction_max: max(|g| g.busy_fraction_max),
        run_delay_s: run_delays.map(|d| d.iter().sum()),
        run_delay_fraction_max: run_delay_max.map(|d| d.into_iter().fold(0.0, f64::max)),
        busy_counts_run_delay: gens.iter().all(|g| g.busy_counts_run_delay),
        saturated: gens.iter().any(|g| g.saturated),
        // The bound on what batching added to any latency: the largest part's.
        batch_wait_max_us: gens
            .iter()
            .filter_map(|g| g.batch_wait_max_us)
            .reduce(f64::max),
        // Each part's share weighted by its threads: every thread measured the same phase.
        batch_wait_share: thread_weighted(gens.iter().map(|g| (g.batch_wait_share, g.threads))),
    }
}

/// Connections that never got an answer, over every part, flagged on the merged fraction (the
/// generator's rule: at least `flag_fraction` of the connections, and at least one).
fn merge_no_answer(docs: &[&Document]) -> NoAnswerDoc {
    let connections: u64 = docs.iter().map(|d| d.no_answer.connections).sum();
    let of_connections: u64 = docs.iter().map(|d| d.no_answer.of_connections).sum();
    let flag_fraction = docs[0].no_answer.flag_fraction;
    NoAnswerDoc {
        connections,
        of_connections,
        fraction: if of_connections > 0 {
            connections as f64 / of_connections as f64
        } else {
            0.0
        },
        flag_fraction,
        flagged: connections > 0 && connections as f64 >= flag_fraction * of_connections as f64,
    }
}

/// Echo: the counters summed, the settings (bytes per connection, chunk) the first part's; the
/// flood completed when the last part did. Every part probes on its own (the orchestrator gives the
/// probe to one): attempts and errors summed, latencies merged.
fn merge_echo(docs: &[&Document]) -> Result<Option<EchoDoc>, String> {
    let echoes: Vec<&EchoDoc> = docs.iter().filter_map(|d| d.echo.as_ref()).collect();
    let Some(first) = echoes.first() else {
        return Ok(None);
    };
    let times: Option<Vec<f64>> = echoes.iter().map(|e| e.completion_time_s).collect();
    let probes: Vec<&ProbeDoc> = echoes.iter().filter_map(|e| e.probe.as_ref()).collect();
    let probe = match probes.first() {
        None => None,
        Some(p) => Some(ProbeDoc {
            interval_s: p.interval_s,
            attempts: probes.iter().map(|p| p.attempts).sum(),
            completed: probes.iter().map(|p| p.completed).sum(),
            errors: probes.iter().map(|p| p.errors).sum(),
            examples: distinct_examples(probes.iter().map(|p| &p.examples)),
            latency: merge_latency(&probes.iter().map(|p| &p.latency).collect::<Vec<_>>())?,
        }),
    };
    Ok(Some(EchoDoc {
        bytes_per_connection: first.bytes_per_connection,
        chunk_bytes: first.chunk_bytes,
        connections_completed: echoes.iter().map(|e| e.connections_completed).sum(),
        completion_time_s: times.map(|t| t.into_iter().fold(0.0, f64::max)),
        verified_bytes: echoes.iter().map(|e| e.verified_bytes).sum(),
        probe,
    }))
}

/// https: the handshake counts summed, what they agreed on the first part's that knows it (every
/// part offered the same).
fn merge_tls(docs: &[&Document]) -> Option<TlsDoc> {
    let all: Vec<&TlsDoc> = docs.iter().filter_map(|d| d.tls.as_ref()).collect();
    let first = all.first()?;
    let known = |f: fn(&TlsDoc) -> &Option<String>| all.iter().find_map(|t| f(t).clone());
    Some(TlsDoc {
        version: known(|t| &t.version),
        cipher_suite: known(|t| &t.cipher_suite),
        alpn: known(|t| &t.alpn),
        handshakes: all.iter().map(|t| t.handshakes).sum(),
        resumed: all.iter().map(|t| t.resumed).sum(),
        resume: first.resume,
        certificate_verified: all.iter().all(|t| t.certificate_verified),
    })
}

/// `--h2`: the GOAWAYs summed, the settings the first part's (every part ran the same).
fn merge_http2(docs: &[&Document]) -> Option<Http2Doc> {
    let all: Vec<&Http2Doc> = docs.iter().filter_map(|d| d.http2.as_ref()).collect();
    let first = all.first()?;
    Some(Http2Doc {
        goaways: all.iter().map(|h| h.goaways).sum(),
        ..(*first).clone()
    })
}

/// The open loop: the rates and counters summed (each part was given its share of the rate), the
/// settings (kind, arrival, seed, late threshold) the first part's. The rate was not met when any
/// part's was not, and each reason says which part's it is ("LABEL: reason"). Lag and uncorrected
/// latency from the merged histograms; the spin window the widest, as over one process's threads.
fn merge_open_loop(parts: &[Part]) -> Result<Option<OpenLoopDoc>, String> {
    let loops: Vec<(&str, &OpenLoopDoc)> = parts
        .iter()
        .filter_map(|p| p.doc.open_loop.as_ref().map(|o| (p.label.as_str(), o)))
        .collect();
    let Some((_, first)) = loops.first() else {
        return Ok(None);
    };
    let all: Vec<&OpenLoopDoc> = loops.iter().map(|(_, o)| *o).collect();
    let sum = |f: fn(&OpenLoopDoc) -> u64| all.iter().map(|o| f(o)).sum::<u64>();
    // A whole sweep has no one asked rate (null); otherwise the parts' shares add up to it.
    let asked: Option<Vec<f64>> = all.iter().map(|o| o.asked_rate_per_s).collect();
    let latency = |f: fn(&OpenLoopDoc) -> &Latency| {
        merge_latency(&all.iter().map(|o| f(o)).collect::<Vec<_>>())
    };
    Ok(Some(OpenLoopDoc {
        kind: first.kind.clone(),
        arrival: first.arrival.clone(),
        seed: first.seed,
        asked_rate_per_s: asked.map(|a| a.iter().sum()),
        achieved_rate_per_s: all.iter().map(|o| o.achieved_rate_per_s).sum(),
        intended: sum(|o| o.intended),
        started: sum(|o| o.started),
        late: sum(|o| o.late),
        late_threshold_us: first.late_threshold_us,
        dropped: sum(|o| o.dropped),
        dropped_overflow: sum(|o| o.dropped_overflow),
        dropped_unsent: sum(|o| o.dropped_unsent),
        rate_not_met: all.iter().any(|o| o.rate_not_met),
        rate_not_met_reasons: loops
            .iter()
            .flat_map(|(label, o)| {
                o.rate_not_met_reasons
                    .iter()
                    .map(move |r| format!("{label}: {r}"))
            })
            .collect(),
        latency_uncorrected: latency(|o| &o.latency_uncorrected)?,
        schedule_lag: latency(|o| &o.schedule_lag)?,
        spin_us: all.iter().map(|o| o.spin_us).max().unwrap_or(0),
        spin_auto: merge_spin_auto(&all),
        spin_wait_s: all.iter().map(|o| o.spin_wait_s).sum(),
        connections: merge_conn_rate(&all)?,
    }))
}

/// `--spin-us auto` over the parts, as over one process's threads: the worst timer lag, the
/// shortest gap between sends, widened when any part widened. None when the window was given (a
/// setting, the same in every part).
fn merge_spin_auto(loops: &[&OpenLoopDoc]) -> Option<SpinAutoDoc> {
    let autos: Option<Vec<&SpinAutoDoc>> = loops.iter().map(|o| o.spin_auto.as_ref()).collect();
    let autos = autos?;
    Some(SpinAutoDoc {
        timer_lag_p99_us: autos.iter().map(|a| a.timer_lag_p99_us).max()?,
        send_gap_us: autos.iter().map(|a| a.send_gap_us).min()?,
        widened: autos.iter().any(|a| a.widened),
    })
}

/// `--conn-rate`: the connection counters summed (each part opened its own), lifetimes merged.
fn merge_conn_rate(loops: &[&OpenLoopDoc]) -> Result<Option<ConnRateDoc>, String> {
    let conns: Vec<&ConnRateDoc> = loops
        .iter()
        .filter_map(|o| o.connections.as_ref())
        .collect();
    let Some(first) = conns.first() else {
        return Ok(None);
    };
    let sum = |f: fn(&ConnRateDoc) -> u64| conns.iter().map(|c| f(c)).sum::<u64>();
    Ok(Some(ConnRateDoc {
        requests_per_conn: first.requests_per_conn,
        started: sum(|c| c.started),
        completed: sum(|c| c.completed),
        ended_early: sum(|c| c.ended_early),
        failed: sum(|c| c.failed),
        unfinished: sum(|c| c.unfinished),
        lifetime: merge_latency(&conns.iter().map(|c| &c.lifetime).collect::<Vec<_>>())?,
    }))
}

/// The per-interval histograms merged interval by interval: the parts started together, so
/// interval i covers the same span of every part (`check_part` makes sure the intervals are as
/// long). A part that measured fewer intervals adds nothing to the later ones.
fn merge_intervals(docs: &[&Document], settings: &HistogramDoc) -> Result<IntervalsDoc, String> {
    let longest = docs
        .iter()
        .map(|d| d.intervals.entries.len())
        .max()
        .unwrap_or(0);
    let entries = (0..longest)
        .map(|i| {
            let parts: Vec<&IntervalEntry> = docs
                .iter()
                .filter_map(|d| d.intervals.entries.get(i))
                .collect();
            let h = merged_histogram(settings, parts.iter().map(|e| e.data.as_str()))?;
            Ok(document::interval_entry(parts[0].t_s, &h))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(IntervalsDoc {
        entries,
        ..docs[0].intervals.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_shares_are_weighted_by_threads_over_the_parts_that_know_them() {
        // One part of 3 threads at 90%, one of 1 thread at 10%: the mean over the 4 threads is 70%.
        let mean = thread_weighted([(Some(0.9), 3), (Some(0.1), 1)].into_iter()).unwrap();
        assert!((mean - 0.7).abs() < 1e-12, "{mean}");
        // A part without the figure (epoll: no batching) is left out, not counted as 0.
        assert_eq!(
            thread_weighted([(None, 3), (Some(0.25), 1)].into_iter()),
            Some(0.25)
        );
        assert_eq!(thread_weighted([(None, 2)].into_iter()), None);
        // One part's figure is its own, to the bit.
        assert_eq!(thread_weighted([(Some(0.7), 3)].into_iter()), Some(0.7));
    }
}
