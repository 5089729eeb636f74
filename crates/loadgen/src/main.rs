//! netarena-load: parse → validate → check limits → run → print → exit code (thresholds,
//! interruption); `check` stops after the limits and prints the configuration; `merge` makes one
//! document of several runs' documents (`result::merge`). See
//! docs/load-generator.md, "Exit codes" for every code returned here.

use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use netarena_load::config::{self, Mode};
use netarena_load::error::RunError;
use netarena_load::io::uring::ring as uring;
use netarena_load::load::{open_run, run};
use netarena_load::result::document::{self, Document};
use netarena_load::result::{human, merge, thresholds};
use netarena_load::{cli, limits, progress, signals};

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
    if let cli::Command::Calibrate(what) = cli.command {
        return calibrate(what);
    }
    if let cli::Command::Merge(args) = cli.command {
        return merge(args);
    }
    if let cli::Command::Check(args) = cli.command {
        return check(args.run.run(), args.skip_limits, argv);
    }
    // Before any other thread starts: they inherit the blocked signals (see `signals`).
    if let Err(e) = signals::install() {
        return stop(RunError::Failure(e));
    }
    match prepare_and_run(cli, argv) {
        Ok((cfg, doc)) => report(&cfg, doc),
        Err(e) => stop(e),
    }
}

/// `netarena-load calibrate cpu|serve`: no load, no signal handling of the load's kind (a stopped
/// server just ends).
fn calibrate(what: cli::CalibrateCommand) -> ExitCode {
    match what {
        cli::CalibrateCommand::Cpu { units } => {
            let figures = netarena_load::calibrate::cpu(units);
            println!(
                "{}",
                serde_json::to_string(&figures).expect("the calibration serializes")
            );
            ExitCode::SUCCESS
        }
        cli::CalibrateCommand::Serve { listen } => {
            match netarena_load::calibrate::bind(listen).and_then(netarena_load::calibrate::serve) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => stop(RunError::Failure(format!(
                    "calibrate serve on {listen}: {e}"
                ))),
            }
        }
    }
}

/// `netarena-load check http|echo ...`: what a run with these arguments does before it sends
/// anything (the configuration and its defaults, the target's and the limits' checks, the
/// `--threshold` expressions), then that configuration as one JSON object instead of the run.
/// Nothing is sent: no `--verify-learn` request, no `--prepare` wait, no connection. With
/// `--skip-limits`, the options' rules only.
fn check(run: cli::Command, skip_limits: bool, argv: Vec<String>) -> ExitCode {
    let configured = if skip_limits {
        config::from_cli(cli::Cli { command: run }, argv, uring::support).map_err(RunError::Usage)
    } else {
        configure(cli::Cli { command: run }, argv)
    };
    match configured {
        Ok(cfg) => {
            let thresholds: Vec<serde_json::Value> = cfg
                .thresholds
                .iter()
                .map(|t| serde_json::json!({ "expr": t.expr, "metric": t.metric_name }))
                .collect();
            let doc = serde_json::json!({
                "mode": cfg.mode_name(),
                "command_line": cfg.command_line,
                "config": document::config_doc(&cfg),
                "thresholds": thresholds,
                "longest_s": cfg.longest().map(|d| d.as_secs_f64()),
            });
            println!("{doc}");
            ExitCode::SUCCESS
        }
        Err(e) => stop(e),
    }
}

/// `netarena-load merge [--label NAME]... FILE...`: one document from the parts' documents, on
/// stdout as a run's `--json`; input that cannot be merged is a usage error (exit 2) naming the file,
/// with nothing on stdout.
fn merge(args: cli::MergeArgs) -> ExitCode {
    match merge::merge_files(&args.files, &args.labels) {
        Ok(doc) => {
            println!(
                "{}",
                serde_json::to_string(&doc).expect("the result document serializes")
            );
            ExitCode::SUCCESS
        }
        Err(e) => stop(RunError::Usage(format!("merge: {e}"))),
    }
}

/// The run's configuration, validated, with the limits it needs checked: all before any I/O.
fn configure(cli: cli::Cli, argv: Vec<String>) -> Result<config::Config, RunError> {
    let cfg = config::from_cli(cli, argv, uring::support).map_err(RunError::Usage)?;
    let fd_limit = limits::raise_fd_limit();
    let probe_sockets = match &cfg.mode {
        Mode::Echo(e) if e.probe_interval.is_some() => 1,
        _ => 0,
    };
    limits::check(
        cfg.connections as u64,
        cfg.threads as u64,
        probe_sockets,
        fd_limit,
        limits::ephemeral_port_range(),
        cfg.source_ips.len() as u64,
    )
    .map_err(RunError::Usage)?;
    Ok(cfg)
}

/// Everything before the result: validate, check limits, learn the expectation, run.
fn prepare_and_run(
    cli: cli::Cli,
    argv: Vec<String>,
) -> Result<(config::Config, Document), RunError> {
    let mut cfg = configure(cli, argv)?;
    if progress::wanted(cfg.quiet) {
        progress::enable();
    }
    if let Mode::Http(h) = &mut cfg.mode {
        if h.verify_learn {
            let expect = run::learn_expectation(h, cfg.target_addr, cfg.timeout)
                .map_err(RunError::Failure)?;
            h.set_learned(expect);
        }
    }
    let open_loop = matches!(&cfg.mode, Mode::Http(h) if h.open.is_some());
    let doc = if open_loop {
        let (steps, search) = open_run::run(&cfg)?;
        document::open_loop_document(&cfg, &steps, search.as_ref())
    } else {
        // The start barrier comes before any connection: every generator of a measurement spread over
        // several hosts opens its connections, warms up and measures from the same instant.
        let start_at = cfg.prepare.then(run::wait_for_start).transpose()?;
        document::document(&cfg, &run::run(&cfg, start_at)?)
    };
    if let Some(path) = &cfg.hlog {
        document::write_hlog(path, &doc).map_err(RunError::Failure)?;
    }
    Ok((cfg, doc))
}

/// Print the result and choose the exit code (thresholds, interruption).
fn report(cfg: &config::Config, mut doc: Document) -> ExitCode {
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
        print!("{}", human::human(&doc));
    }
    if doc.interrupted {
        return ExitCode::from(EXIT_INTERRUPTED);
    }
    if doc.thresholds.iter().any(|t| !t.pass) {
        return ExitCode::from(EXIT_THRESHOLD_FAILED);
    }
    ExitCode::SUCCESS
}

/// Nothing (or no result) to print: say why, exit with the error's code.
fn stop(e: RunError) -> ExitCode {
    eprintln!("netarena-load: {e}");
    ExitCode::from(e.exit_code())
}
