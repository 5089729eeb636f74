//! netarena-load: parse → validate → check limits → run → print → exit code (thresholds,
//! interruption). See docs/load-generator.md, "Exit codes" for every code returned here.

use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use netarena_load::config::{self, Mode};
use netarena_load::openrun::{self, OpenError};
use netarena_load::{cli, limits, output, progress, run, signals, thresholds};

/// Bad usage, a refused target, or a limit that makes the run impossible; nothing was sent.
const EXIT_USAGE: u8 = 2;
/// `--prepare` got no start time (stdin closed): nothing was measured.
const EXIT_ABORTED: u8 = 3;
/// The tool itself failed.
const EXIT_FAILURE: u8 = 1;
/// The run finished and its result was printed, but a `--threshold` failed (k6's code for the same).
const EXIT_THRESHOLD_FAILED: u8 = 99;
/// The first SIGINT/SIGTERM ended the measured phase; the result of what was measured was printed
/// (k6's code for an external abort). Wins over 99: a verdict on part of a run is no verdict. A
/// second signal exits with 128 + its number without printing (`signals`).
const EXIT_INTERRUPTED: u8 = 105;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let cli = cli::Cli::parse(); // exits with 2 on a parse error, 0 for --help / --version
    if let cli::Command::Completions { shell } = cli.command {
        let mut cmd = cli::Cli::command();
        clap_complete::generate(shell, &mut cmd, "netarena-load", &mut std::io::stdout());
        return ExitCode::SUCCESS;
    }
    // Before any other thread starts: they inherit the blocked signals (see `signals`).
    if let Err(e) = signals::install() {
        return failure(&e);
    }
    let mut cfg = match config::from_cli(cli, argv) {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };

    if progress::wanted(cfg.quiet) {
        progress::enable();
    }

    let fd_limit = limits::raise_fd_limit();
    let probe_sockets = match &cfg.mode {
        Mode::Echo(e) if e.probe_interval.is_some() => 1,
        _ => 0,
    };
    if let Err(e) = limits::check(
        cfg.connections as u64,
        cfg.threads as u64,
        probe_sockets,
        fd_limit,
        limits::ephemeral_port_range(),
        cfg.source_ips.len() as u64,
    ) {
        return usage_error(&e);
    }

    if let Mode::Http(h) = &mut cfg.mode {
        if h.verify_learn {
            match run::learn_expectation(h, cfg.target_addr, cfg.timeout) {
                Ok(expect) => h.set_learned(expect),
                Err(e) => return failure(&e),
            }
        }
    }

    let open_loop = matches!(&cfg.mode, Mode::Http(h) if h.open.is_some());
    let mut doc = if open_loop {
        match openrun::run(&cfg) {
            Ok(d) => d,
            Err(e) => return open_error(e),
        }
    } else {
        // The start barrier comes before any connection: every generator of a measurement spread over
        // several hosts opens its connections, warms up and measures from the same instant.
        let start_at = if cfg.prepare {
            match openrun::wait_for_start() {
                Ok(t) => Some(t),
                Err(e) => return open_error(e),
            }
        } else {
            None
        };
        match run::run(&cfg, start_at) {
            Ok(o) => output::document(&cfg, &o),
            Err(e) => return failure(&e),
        }
    };
    if let Some(path) = &cfg.hlog {
        if let Err(e) = output::write_hlog(path, &doc) {
            return failure(&e);
        }
    }
    doc.interrupted = signals::stop_requested();
    if let Mode::Http(h) = &cfg.mode {
        if let Some(asked) = h
            .requests
            .filter(|&n| doc.totals.responses < n && !doc.interrupted)
        {
            eprintln!(
                "netarena-load: stopped by the time bound ({:?}) after {} of {asked} responses; pass a longer -d to wait for all of them",
                cfg.duration.unwrap_or_default(),
                doc.totals.responses
            );
        }
    }
    doc.thresholds = thresholds::evaluate(&cfg.thresholds, &doc);
    if cfg.json {
        println!(
            "{}",
            serde_json::to_string(&doc).expect("the result document serializes")
        );
    } else {
        print!("{}", output::human(&doc));
    }
    if doc.interrupted {
        return ExitCode::from(EXIT_INTERRUPTED);
    }
    if doc.thresholds.iter().any(|t| !t.pass) {
        return ExitCode::from(EXIT_THRESHOLD_FAILED);
    }
    ExitCode::SUCCESS
}

/// The exit of a run stopped by the open loop or the `--prepare` barrier.
fn open_error(e: OpenError) -> ExitCode {
    match e {
        OpenError::Usage(e) => usage_error(&e),
        OpenError::Failure(e) => failure(&e),
        OpenError::Aborted(e) => {
            eprintln!("netarena-load: {e}");
            ExitCode::from(EXIT_ABORTED)
        }
    }
}

fn usage_error(msg: &str) -> ExitCode {
    eprintln!("netarena-load: {msg}");
    ExitCode::from(EXIT_USAGE)
}

fn failure(msg: &str) -> ExitCode {
    eprintln!("netarena-load: {msg}");
    ExitCode::from(EXIT_FAILURE)
}
