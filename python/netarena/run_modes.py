"""`netarena run`, one function per run mode: a suite on this machine (suite_mode), a suite across hosts
(cluster_mode, --cluster), a server of one's own (url_mode, --url) and an interrupted run continued
(resume_mode, --resume). cli.run reads and checks the options and hands one of them to `run`.

Each mode plans its run (a Setup) with every check made before anything starts, a problem exiting 2 (bad input)
with nothing stored; then _execute, the same for every mode, connects a cluster, opens the store, runs the plan
through the backend and reports. Exit codes: the docstring of netarena.cli.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import click
import psutil
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .backends import make_backend
from .backends.base import StopRun
from .generator import GeneratorMissing, check_thresholds, find_generator, supports_https
from .generator_build import generator_version, not_the_release_build
from .backends.cluster import ClusterBackend
from .cli_common import exit_interrupted, fail_bad_input, ignore_stop_signals, parse_cpus, split_list
from .cli_report import measured_any, report_after_run, summary_after_run
from .cluster import ClusterError
from .cluster.spec import load_cluster
from .config import SCENARIOS, Suite, check_suite, load_suite, value_line
from .checkout import repo_root
from .contestants import default_contestants_dir, for_servers, load, select
from .errors import EXIT_FAILED, EXIT_THRESHOLD_FAILED, ConfigError, did_you_mean
from .export import run_summary
from .plan.external import pick_cpus, plan_external
from .plan.suite import Plan, build_plan, minutes_seconds
from .precision import MIN_REPEATS, precision_option
from .precision import settings as precision_settings
from .process import StopRequest, available_cpus
from .runner import Interrupted, Runner, cleanup_orphans, new_run, orchestrator_alive, resolve_cpus
from .services import remove_stale_data
from .tls import remove_stale_certificates
from .spread import is_loopback_host, open_files_hard_limit, plan_for
from .store import Store
from .term import console as make_console, styled


@dataclass
class RunOptions:
    """`netarena run`'s options as given (cli.run), the backend asked for resolved (real | mock)."""

    suite: str | None
    only: str | None
    scenario_opt: str | None
    repeat: int | None
    precision_opt: str | None
    profile: bool
    duration: str | None
    warmup: str | None
    results_dir: Path
    resume: str | None
    server_cpus: str | None
    generator_cpus: str | None
    no_apt: bool
    install_jobs: int
    run_as_root: bool
    contestants_dir: Path | None
    quiet: bool
    json_mode: bool
    cluster_file: Path | None
    thresholds: tuple[str, ...]
    url: str | None
    pid: int | None
    process_name: str | None
    server_name: str | None
    connections: str | None
    allow_target: tuple[str, ...]
    request_file: Path | None
    method: str | None
    headers: tuple[str, ...]
    body: str | None
    expect_status: int | None
    expect_body: str | None
    backend_kind: str
    cacert: Path | None = None  # --url https://: whom to trust (--cacert FILE, or any with --insecure)
    insecure: bool = False
    calibration: bool = True  # --calibration/--no-calibration (NETARENA_CALIBRATION): take the run's calibration


@dataclass
class Setup:
    """A run as its mode planned it, every check made: what _execute needs."""

    plan: Plan
    server: list[int]  # the server's CPUs
    generator_set: list[int]  # the generator's CPUs
    backend_kind: str  # real | mock | external | cluster
    suite_path: Path | str | None
    contestants_dir: Path | None
    scenario_filter: list[str] | None
    allow_apt: bool
    cpu_warning: str | None = None
    contestants: list = field(default_factory=list)
    cluster_file: Path | None = None
    cluster: tuple | None = None  # (ClusterSpec, folder) of the cluster file, once read
    generator_path: Path | None = None
    user: object | None = None  # server_user.ServerUser the servers run as (the real backend), or None
    external: object | None = None  # the server of --url (plan.external.ExternalServer)
    found_by: str | None = None  # how the server of --url's process was found
    store: Store | None = None  # opened while planning (--resume)
    run_row: object | None = None  # the run --resume continues


# ----------------------------------------------------------------------------- the run modes


def run(mode, o: RunOptions, ui: UI) -> None:
    """The run as `mode` (one of the four below) plans it, every check made before anything starts (a problem
    exits 2 with nothing stored), then executed like any other."""
    try:
        setup = mode(o, ui)
        _check_runnable(setup, o)
    except ConfigError as exc:  # StoreError too: a damaged store or one of another schema version
        fail_bad_input(exc)
        return
    _execute(setup, o, ui)


def suite_mode(o: RunOptions, ui: UI) -> Setup:
    """A suite's contestants on this machine (`netarena run [SUITE]`), with the real or the mock backend."""
    setup = _suite_setup(o, cluster_file=None)
    if setup.backend_kind == "real":
        _check_generator(setup, o)
    return setup


def cluster_mode(o: RunOptions, ui: UI) -> Setup:
    """A suite across hosts (`netarena run [SUITE] --cluster FILE`): the server on one, the load on the others."""
    setup = _suite_setup(o, cluster_file=o.cluster_file)
    _across_hosts(setup, o)
    return setup


def url_mode(o: RunOptions, ui: UI) -> Setup:
    """A server netarena did not start (`netarena run --url URL`): nothing installed, started or stopped."""
    setup = _url_setup(o)
    _check_generator(setup, o)
    return setup


def resume_mode(o: RunOptions, ui: UI) -> Setup:
    """An interrupted run continued (`netarena run --resume [RUN]`) with its stored suite, options and backend
    (across hosts again when it ran across hosts)."""
    setup = _resume_setup(o, ui)
    if setup.cluster_file is not None:
        _across_hosts(setup, o)
    elif setup.backend_kind == "real":
        _check_generator(setup, o)
    return setup


# ----------------------------------------------------------------------------- planning each mode


def _suite_setup(o: RunOptions, cluster_file: Path | None) -> Setup:
    """The suite file given (default: quick) with the options' changes, its contestants and its plan."""
    suite, only, scenario_opt, contestants_dir = o.suite, o.only, o.scenario_opt, o.contestants_dir
    suite_path = resolve_suite_path(suite)
    parsed, _ = load_suite(suite_path)
    contestants_dir = (contestants_dir or default_contestants_dir()).absolute()
    overrides = _run_overrides(o.repeat, o.duration, o.warmup, o.thresholds, o.precision_opt)
    if o.profile:
        overrides["profile"] = True
    if only:
        overrides["contestants"] = split_list(only)
        overrides["exclude"] = []
    effective = _override(parsed, overrides)
    if effective.profile and cluster_file is not None:
        raise ConfigError("profiles are taken on this machine only: a run across hosts (--cluster) cannot profile "
                          "its server host yet", path="--profile" if o.profile else str(suite_path), field=None
                          if o.profile else "profile", hint="drop --profile (or the suite's profile = true)")
    scenario_filter = split_list(scenario_opt)
    for name in scenario_filter or []:
        if name not in SCENARIOS:
            raise ConfigError(f"unknown scenario '{name}' (known: {', '.join(SCENARIOS)})",
                              path="--scenario", hint=did_you_mean(name, SCENARIOS))
    in_suite = {m.scenario for m in effective.measure}
    if scenario_filter and not set(scenario_filter) & in_suite:
        raise ConfigError(f"the suite measures {', '.join(sorted(in_suite))}; none of those is in "
                          f"--scenario {scenario_opt}", path="--scenario")
    cli_cpus = (parse_cpus(o.server_cpus, "--server-cpus"), parse_cpus(o.generator_cpus, "--generator-cpus"))
    if cli_cpus == (None, None) and effective.cpus is not None:
        cli_cpus = (effective.cpus.server, effective.cpus.generator)
    server, generator_set, cpu_warning = resolve_cpus(*cli_cpus)
    if effective.cpus is not None and effective.cpus.services:
        unknown = sorted(set(effective.cpus.services) - set(available_cpus()))
        if unknown:
            raise ConfigError(f"CPU(s) {unknown} not available to this process (available: "
                              f"{available_cpus()})", path=str(suite_path), field="cpus.services")
    allow_apt = not o.no_apt
    source = "--only" if only else f"{suite_path}: contestants"
    where = {} if only else {"field": "contestants",
                             "line_of": lambda name: value_line(suite_path, "contestants", name)}
    names = select(contestants_dir, list(effective.contestants), list(effective.exclude),
                   "--only" if only else str(suite_path), **where)
    if not names:
        raise ConfigError(f"no contestant matches {list(effective.contestants)} in {contestants_dir}",
                          path=source)
    for index, entry in enumerate(effective.measure):
        if entry.contestants is not None:  # an exact name that does not exist is a typo: say so
            select(contestants_dir, list(entry.contestants), [], str(suite_path),
                   field=f"measure[{index}].contestants")
    setup = Setup(None, server, generator_set, o.backend_kind, suite_path, contestants_dir, scenario_filter,
                  allow_apt, cpu_warning, cluster_file=cluster_file)
    _plan_contestants(setup, effective, names)
    return setup


def _url_setup(o: RunOptions) -> Setup:
    """The server at --url, found and answering, and the plan of the levels its options describe."""
    external, effective, plan, found_by = plan_external(
        url=o.url, scenarios=split_list(o.scenario_opt), connections=o.connections, pid=o.pid,
        process_name=o.process_name, name=o.server_name, allow_target=list(o.allow_target),
        request_file=o.request_file, method=o.method, headers=o.headers, body=o.body, expect_status=o.expect_status,
        expect_body=o.expect_body, overrides=lambda base: _override(base, _run_overrides(
            o.repeat, o.duration, o.warmup, o.thresholds, o.precision_opt)), cacert=o.cacert, insecure=o.insecure)
    server, generator_set, cpu_warning = pick_cpus(external.pid,
                                                   parse_cpus(o.generator_cpus, "--generator-cpus"))
    return Setup(plan, server, generator_set, "external", None, None, None, False, cpu_warning,
                 external=external, found_by=found_by)


def _resume_setup(o: RunOptions, ui: UI) -> Setup:
    """The interrupted run in the store, its stored suite, options and CPUs, and its contestants as they are now
    (each manifest still the one stored)."""
    results_dir, resume, contestants_dir, cluster_file = o.results_dir, o.resume, o.contestants_dir, o.cluster_file
    if not (Path(results_dir) / "netarena.sqlite").is_file():
        raise ConfigError(f"no store in {results_dir} to resume from", path="--results")
    store = Store(results_dir)
    run_row = _find_resumable(store, resume, results_dir)
    if orchestrator_alive(run_row):
        raise ConfigError(f"run {run_row['id']} is still running (pid {run_row['orchestrator_pid']})",
                          path="--resume")
    stored_args = json.loads(run_row["args_json"])
    if stored_args.get("external"):
        raise ConfigError(f"run {run_row['id']} measured a server of your own "
                          f"({stored_args['external']['url']}); such a run is not resumed: measure again "
                          "with the same `netarena run --url ...`", path="--resume")
    if any(v is not None for v in (o.suite, o.only, o.scenario_opt, o.repeat, o.precision_opt, o.duration, o.warmup,
                                   o.thresholds or None)):
        ui.warn("--resume replays the stored suite and options; the suite/--only/--scenario/--repeat/"
                "--precision/"
                "--duration/--warmup/--threshold given now are ignored")
    effective = Suite.model_validate(json.loads(run_row["suite_json"]))
    # The commands run come from the contestants folder named now (--contestants-dir, else the
    # checkout's), never from a path the store holds; each manifest must still be the one stored.
    contestants_dir = (contestants_dir or default_contestants_dir()).absolute()
    scenario_filter = stored_args.get("scenarios")
    server, generator_set = json.loads(run_row["server_cpus_json"]), json.loads(run_row["generator_cpus_json"])
    backend_kind = run_row["backend"]
    if backend_kind == "cluster":
        cluster_file = cluster_file or Path(stored_args["cluster"])
    elif backend_kind not in ("real", "mock"):
        raise ConfigError(f"run {run_row['id']} names backend {backend_kind!r} (real | mock | cluster)",
                          path="--resume")
    allow_apt = stored_args.get("allow_apt", True) and not o.no_apt
    suite_path = run_row["suite_path"]
    try:
        names = select(contestants_dir, list(effective.contestants), list(effective.exclude),
                       "the resumed run's contestants")
    except ConfigError as exc:
        used = stored_args.get("contestants_dir")
        if used and Path(used) != contestants_dir:
            exc.hint = f"the run used --contestants-dir {used}: pass it again"
        raise
    _same_manifests(store, run_row["id"], load(contestants_dir, names), contestants_dir)
    setup = Setup(None, server, generator_set, backend_kind, suite_path, contestants_dir, scenario_filter,
                  allow_apt, None, cluster_file=cluster_file, store=store, run_row=run_row)
    _plan_contestants(setup, effective, names)
    return setup


def _plan_contestants(setup: Setup, effective: Suite, names: list[str]) -> None:
    """The plan of a suite's contestants (a suite run's or a resumed one's)."""
    setup.contestants = contestants = load(setup.contestants_dir, names)
    # Servers on this machine start with the open-files hard limit (a cluster's server host has its own).
    on_this_machine = setup.backend_kind == "real" and setup.cluster_file is None
    setup.plan = build_plan(effective, contestants, setup.scenario_filter,
                            open_files_hard_limit() if on_this_machine else None,
                            setup.generator_set if on_this_machine else None)


def _across_hosts(setup: Setup, o: RunOptions) -> None:
    """What a run across hosts refuses, then the cluster file read."""
    plan, thresholds, suite_path = setup.plan, o.thresholds, setup.suite_path
    if o.server_cpus or o.generator_cpus:
        raise ConfigError("CPUs are each host's own across hosts (its worker's CPU affinity)",
                          path="--server-cpus/--generator-cpus")
    # Each generator host judges only its own share: a threshold or a find-max search would be decided on
    # part of the load. Refused until the merged result is judged instead (docs/many-machines.md).
    if any(item.level.thresholds for item in plan.items):
        raise ConfigError("thresholds are not supported across hosts (each host would judge its share of "
                          "the load only)", path="--threshold" if thresholds else str(suite_path),
                          hint="run the suite without --cluster, or drop the thresholds")
    if any(item.level.find_max_slo is not None for item in plan.items):
        raise ConfigError("find_max is not supported across hosts (each host would search its share of "
                          "the rate only)", path=str(suite_path), hint="run the search without --cluster")
    if any(item.level.param("conn_rate_steps") for item in plan.items):
        raise ConfigError("connections_per_step is not supported across hosts (each host would open the "
                          "whole count at its share of the rate)", path=str(suite_path),
                          hint="run the sweep without --cluster")
    if plan.needs_tls():
        # The run's certificate is made on this host; the server host would need it too (not built).
        raise ConfigError("protocols over TLS (h1-tls, h2) are not supported across hosts yet (the run's "
                          "certificate is made on this host only)", path=str(suite_path), field="measure.protocol",
                          hint="run the TLS levels without --cluster")
    setup.cluster = load_cluster(setup.cluster_file)
    setup.backend_kind = "cluster"
    try:  # the generator hosts' documents are merged on this host, by its netarena-load (spread.merge_documents)
        find_generator()
    except GeneratorMissing as exc:
        raise ConfigError(f"this host merges the generator hosts' results with netarena-load: {exc}") from None


def _check_generator(setup: Setup, o: RunOptions) -> None:
    """netarena-load found, accepting the thresholds, and able to hold every level (spread over several
    processes where one cannot), before anything starts: the real and external backends run it here."""
    plan, external, thresholds, suite_path = setup.plan, setup.external, o.thresholds, setup.suite_path
    effective = plan.suite
    try:
        generator_path = find_generator()
    except GeneratorMissing as exc:
        raise ConfigError(str(exc)) from None
    setup.generator_path = generator_path
    if plan.needs_tls() and not supports_https(generator_path):
        raise ConfigError(f"the plan has levels over TLS (protocol h1-tls or h2) and {generator_path} does not speak "
                          "https (its http mode has no --cacert)", path=str(suite_path), field="measure.protocol",
                          hint="build the current netarena-load (`cargo build --release -p netarena-load`), or "
                               "measure protocol = [\"h1\"] only")
    gates = list(dict.fromkeys(t for item in plan.items for t in item.level.thresholds))
    refused = check_thresholds(generator_path, gates)
    if refused:
        raise ConfigError(refused, path="--threshold" if thresholds else str(suite_path),
                          field=None if thresholds else "measure.thresholds",
                          hint="docs/load-generator.md lists the metrics, operators and units")
    # A level beyond one generator process is spread over several (spread.plan_spread); refused here
    # only when no spread can hold it, before anything starts.
    for item in plan.items:
        try:
            spread = plan_for(item.level.connections, probe=item.level.probe_interval_s is not None,
                              open_files_cap=effective.generator_open_files,
                              loopback=external is None or is_loopback_host(external.host))
            if spread.processes > 1 and item.level.find_max_slo is not None:
                # Each process would search a rate of its own: no one highest rate comes of that.
                raise ConfigError(f"find_max needs one generator process, and {spread.reason}")
            if spread.processes > 1 and item.level.param("conn_rate_steps"):
                # Each process would open the whole count per step at its share of the rate.
                raise ConfigError(f"connections_per_step needs one generator process, and {spread.reason}")
        except ConfigError as exc:
            raise ConfigError(f"{item.scenario} at {item.level.connections:,} connections: {exc}",
                              path=str(suite_path or "--connections"),
                              field="measure.connections" if suite_path else None,
                              hint="`netarena doctor` shows the limits and how to raise them") from None


def _check_runnable(setup: Setup, o: RunOptions) -> None:
    """The user the servers run as (the real backend), and something left to measure."""
    plan = setup.plan
    setup.user = for_servers(o.run_as_root, setup.contestants) if setup.backend_kind == "real" else None
    if plan.total == 0:
        skipped = [f"{c} {sc or ''} {lk or ''}: {why}".replace("  ", " ") for c, sc, lk, why in plan.skips
                   if lk is not None]
        if skipped:  # every level was skipped for a reason of its own (e.g. more connections than fit)
            raise ConfigError("nothing to measure: every planned level is skipped: " + "; ".join(skipped[:5]))
        raise ConfigError("nothing to measure: no selected contestant implements the selected scenarios "
                          "(see `netarena list`)")


# ----------------------------------------------------------------------------- running the plan, any mode


def _execute(setup: Setup, o: RunOptions, ui: UI) -> None:
    """Warn, connect the cluster, open the store, run the plan through its backend, report; exit as the run
    ended (docs in netarena.cli)."""
    plan, external, found_by, store = setup.plan, setup.external, setup.found_by, setup.store
    server, generator_set, backend_kind = setup.server, setup.generator_set, setup.backend_kind
    results_dir, contestants_dir, cluster_file, cluster = o.results_dir, setup.contestants_dir, setup.cluster_file, \
        setup.cluster
    generator_path, json_mode, quiet = setup.generator_path, o.json_mode, o.quiet
    if setup.cpu_warning:
        ui.warn(setup.cpu_warning)
    generator_says = generator_version(generator_path) if generator_path else None
    build_warning = not_the_release_build(generator_says)
    if build_warning:
        ui.warn(build_warning)
    for notice in plan.notices:
        ui.warn(notice)
    if external is not None and external.pid is None:
        ui.warn(f"the server's process: {found_by}; its CPU, RSS and context switches are not monitored "
                "(give --pid or --process-name)")

    cluster_backend, cluster_info = None, None
    if cluster is not None:
        try:
            cluster_backend = ClusterBackend(*cluster, say=ui.info).connect()
            cluster_info = cluster_backend.check()
        except ClusterError as exc:
            if cluster_backend is not None:
                cluster_backend.close()
            fail_bad_input(ConfigError(str(exc), path=cluster_file))
        # Each host's own CPU numbers (its worker's affinity), recorded as the run's CPU sets.
        roles = {h["role"]: [] for h in cluster_info["hosts"]}
        for host in cluster_info["hosts"]:
            roles[host["role"]] += host["cpus"]
        server, generator_set = sorted(set(roles["server"])), sorted(set(roles.get("generator", [])))
        ui.info(f"cluster {cluster[0].scheduler}: server host {cluster[0].server.worker} "
                f"({cluster[0].server.address}), generator hosts {', '.join(cluster[0].generators.workers)}")

    if store is None:  # last: bad input elsewhere (the cluster too) leaves no store behind
        try:
            store = Store(results_dir)
        except ConfigError as exc:  # StoreError: a damaged store or one of another schema version
            if cluster_backend is not None:
                cluster_backend.close()
            fail_bad_input(exc)
            return

    # ---- run
    cleanup_orphans(store, ui.warn)
    live_run_ids = {r["id"] for r in store.runs() if orchestrator_alive(r)}
    for folder in remove_stale_data(Path(results_dir), live_run_ids):
        ui.warn(f"removed the database data left by an interrupted run: {folder}")
    for folder in remove_stale_certificates(Path(results_dir), live_run_ids):
        ui.warn(f"removed the TLS certificate and key left by an interrupted run: {folder}")
    if setup.run_row is not None:
        run_id = setup.run_row["id"]
        store.claim_run(run_id, _own_start_time())
        ui.info(f"resuming run {run_id} ({plan.suite.name}) in {store.path}")
    else:
        args = {"argv": sys.argv, "contestants_dir": str(contestants_dir) if contestants_dir else None,
                "scenarios": setup.scenario_filter, "allow_apt": setup.allow_apt, "results_dir": str(results_dir),
                "cluster": str(Path(cluster_file).absolute()) if cluster_file else None}
        if external is not None:
            args["external"] = dict(external.describe(), found_by=found_by)
        suite_path = setup.suite_path
        run_id = new_run(store, plan, suite_path=str(suite_path) if suite_path else None, args=args,
                         backend_name=backend_kind,
            server_cpus=server, generator_cpus=generator_set,
            generator_path=str(generator_path) if generator_path else None,
            generator_version=generator_says, cluster=cluster_info)
        # Installs are estimated from this machine's cache; a cluster's happen on its server host.
        estimate = plan.estimate(o.install_jobs, installs=backend_kind == "real")
        installs_elsewhere = " plus installs on the server host" if backend_kind == "cluster" else ""
        ui.info(f"run {run_id}: suite {plan.suite.name}, {len({i.contestant for i in plan.items})} contestant(s), "
                f"{len(plan.items)} measurement(s) x {plan.suite.repeat} repeat(s)"
                f"{' + 1 profiled' if plan.suite.profile else ''} = {plan.total}; estimated "
                f"{minutes_seconds(estimate.total_s)}{installs_elsewhere}: {estimate.describe()}; server CPUs "
                f"{server}, generator CPUs {generator_set}; store {store.path}")
        if plan.suite.precision:
            _, repeat_max, budget_s = precision_settings(plan.suite)
            ui.info(f"precision ±{plan.suite.precision}: the estimate is for the minimum {plan.suite.repeat} "
                    f"repeat(s); measurements wider than that get more, up to {repeat_max}"
                    + (f" or {budget_s:g} s of measuring" if budget_s else ""))
        if plan.suite.time_budget_s and plan.estimate_s() > plan.suite.time_budget_s:
            ui.warn(f"the estimate exceeds the suite's time_budget_s ({plan.suite.time_budget_s:g} s)")
    for contestant in plan.contestants:
        if contestant.manifest.start.warmup_min_s > plan.suite.warmup_s and not json_mode:
            if plan.suite.apply_warmup_min:
                ui.info(f"{contestant.name}: warm-up {contestant.manifest.start.warmup_min_s:g} s instead of "
                        f"{plan.suite.warmup_s:g} s" + (" on each level's first repeat" if plan.server_per_level
                                                      else "")
                        + " (its start.warmup_min_s; marked WARM in the report)")
            else:
                ui.info(f"{contestant.name}: warm-up {plan.suite.warmup_s:g} s, below its start.warmup_min_s "
                        f"{contestant.manifest.start.warmup_min_s:g} s (the suite's apply_warmup_min = false; "
                        "marked COLD in the report)")
    for contestant, scenario, level_key, reason in plan.skips:
        if not json_mode:
            ui.info(f"skip {contestant}{' ' + scenario if scenario else ''}"
                    f"{' ' + level_key if level_key else ''}: {reason}")

    runner = Runner(store, None, ui, allow_apt=setup.allow_apt, install_jobs=o.install_jobs,
                    calibration=o.calibration)
    if cluster_backend is not None:
        backend = cluster_backend
    elif backend_kind == "real":
        backend = make_backend(backend_kind, generator=generator_path, on_spawn=runner.track,
                               on_reaped=runner.untrack, user=setup.user)
    elif backend_kind == "external":
        backend = make_backend(backend_kind, generator=generator_path, on_spawn=runner.track,
                               on_reaped=runner.untrack)
    else:
        backend = make_backend(backend_kind)
    runner.backend = backend
    StopRequest.requested = False
    previous = {sig: signal.signal(sig, StopRequest.handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    interrupted = False
    try:
        runner.execute(plan, run_id, results_dir, server, generator_set)
    except (Interrupted, KeyboardInterrupt):
        previous = ignore_stop_signals(previous)
        ui.end_progress()
        store.set_run_status(run_id, "interrupted")
        cleanup_orphans(store, ui.warn)
        # What was measured gets its report too (marked partial); --resume rewrites it when the run completes.
        partial = report_after_run(store, run_id, results_dir, ui.err) if measured_any(store, run_id) else None
        again = "Measure again with the same command (a run of --url is not resumed)." if external is not None \
            else f"Resume with:\n  {resume_command(run_id, results_dir, contestants_dir)}"
        ui.err.print(f"interrupted: what was measured is stored in {store.path}"
                     f"{f'; partial report: {partial}' if partial else ''}. {again}", soft_wrap=True)
        store.close()
        interrupted = True
    except StopRun as exc:
        ui.end_progress()
        store.set_run_status(run_id, "interrupted")
        ui.err.print(f"error: the run stopped: {exc}. What was measured is stored in {store.path}. Resume with:\n"
                     f"  {resume_command(run_id, results_dir, contestants_dir)}", soft_wrap=True)
        sys.exit(EXIT_FAILED)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if cluster_backend is not None:
            cluster_backend.close()
    if interrupted:
        exit_interrupted()
    store.set_run_status(run_id, "complete")
    summary = run_summary(store, run_id)
    # The HTML report is written from the store (never from live state), like `netarena report` does; a
    # failure to render it is a warning, never a traceback over a run whose results are stored.
    report_started = time.monotonic()
    report_path = report_after_run(store, run_id, results_dir, ui.err)
    phases = _phase_times(runner.phase_s, time.monotonic() - report_started)
    store.add_to_run_environment(run_id, "phase_s", phases)
    summary["phase_s"] = phases
    if json_mode:
        summary["report"] = str(report_path) if report_path else None
        click.echo(json.dumps(summary, indent=2, default=str))
    elif not quiet:
        summary_after_run(store, run_id, results_dir, ui.out, ui.err)
        if report_path:
            ui.out.print(f"report: {report_path}")
        ui.out.print("took: " + ", ".join(f"{name} {minutes_seconds(s)}" for name, s in phases.items()))
    store.close()  # the WAL folded into netarena.sqlite: that one file now holds the run
    if summary["measurements"]["ok"] == 0:
        if json_mode:  # the document holds each failure; stderr still says why the exit status is 1
            failures = [f"{g['contestant']} {g['scenario']} {g['level_key']} {failure}"
                        for g in summary["groups"] for failure in g["failures"]]
            ui.err.print(f"error: no measurement succeeded{f'; first failure: {failures[0]}' if failures else ''} "
                         f"(every failure: groups[].failures in the JSON)", markup=False, highlight=False,
                         soft_wrap=True)
        sys.exit(EXIT_FAILED)
    if summary["measurements"]["threshold_failed"]:
        if not json_mode:
            ui.err.print(f"{summary['measurements']['threshold_failed']} measurement(s) failed a threshold "
                         f"(exit {EXIT_THRESHOLD_FAILED})", markup=False, highlight=False)
        sys.exit(EXIT_THRESHOLD_FAILED)


# ----------------------------------------------------------------------------- output and options of a run


class UI:
    """Everything the run shows. --quiet keeps warnings only; --json keeps stdout for the final document.

    On a terminal, a live progress bar; elsewhere (CI, `| tee`, a file) a bar is invisible until the end, so
    one plain line per finished measurement instead, which a log shows as it comes."""

    def __init__(self, quiet: bool = False, json_mode: bool = False):
        self.quiet = quiet or json_mode
        self.out = make_console(stderr=json_mode)
        self.err = make_console(stderr=True)
        self.progress: Progress | None = None
        self.task = None
        self.current = ""
        self.last_figure = ""
        self.lines_total = 0   # measurements of this run when printing one line each (not on a terminal)
        self.lines_done = 0

    def info(self, message: str) -> None:
        if not self.quiet:
            self.out.print(message)

    def warn(self, message: str) -> None:
        self.err.print(styled(("warning:", "yellow"), " ", message))

    def start_progress(self, total: int, already_done: int = 0) -> None:
        if already_done:
            self.info(f"{already_done} measurement(s) already stored; {total} to go")
        if self.quiet or total == 0:
            return
        if not self.out.is_terminal:
            self.lines_total, self.lines_done = total, 0
            return
        self.progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[figure]}", markup=False),
                                 console=self.out, transient=False)
        self.progress.start()
        self.task = self.progress.add_task("measuring", total=total, figure="")

    def measuring(self, item, repeat_index: int) -> None:
        self.current = f"{item.contestant} {item.scenario} {item.level.key} #{repeat_index + 1}"
        if self.progress is not None:
            self.progress.update(self.task, description=self.current)

    def phase(self, text: str) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=f"{self.current} ({text})")

    def measured(self, record: dict) -> None:
        name = f"{record['contestant']} {record['scenario']} {record['level_key']} #{record['repeat_index'] + 1}"
        if record["status"] == "ok":
            figure = f"{record['requests_per_s']:,.0f} req/s" if record.get("requests_per_s") is not None else ""
            flags = f" [{', '.join(record['flags'])}]" if record.get("flags") else ""
            self.last_figure = f"last: {name}: {figure}{flags}"
            line = styled(f"{name}: {figure}{flags}")
        else:
            self.last_figure = f"last: {name}: FAILED"
            message = f"{name}: {record.get('failure_kind')}: {record.get('error')}"
            line = styled(("failed", "red"), " ", message)
            if self.progress is not None:
                self.progress.console.print(line)
            elif not self.quiet and not self.lines_total:
                self.err.print(f"failed: {message}")
        if self.progress is not None:
            self.progress.update(self.task, advance=1, figure=self.last_figure)
        elif self.lines_total:
            self.lines_done += 1
            self.out.print(styled(f"[{self.lines_done}/{self.lines_total}] ", line), soft_wrap=True)

    def end_progress(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
        self.lines_total = 0


DEFAULT_SUITE = "quick"


def resolve_suite_path(value: str | None) -> Path:
    """A path to a .toml file, or a suite name looked up in the checkout's suites/ (and suites/seeds/)."""
    name = value or DEFAULT_SUITE
    candidate = Path(name)
    if candidate.suffix == ".toml" or os.sep in name:
        if not candidate.is_file():
            raise ConfigError("suite file not found", path=candidate)
        return candidate
    roots = [Path("suites")]
    if repo_root() is not None:
        roots.insert(0, repo_root() / "suites")
    for root in roots:
        for sub in ("", "seeds"):
            path = root / sub / f"{name}.toml"
            if path.is_file():
                return path
    known = sorted({p.stem for root in roots if root.is_dir() for p in root.rglob("*.toml")})
    raise ConfigError(f"unknown suite '{name}' (looked in {', '.join(str(r) for r in roots)}; known: "
                      f"{', '.join(known) or 'none'})", path="SUITE", hint=did_you_mean(name, known))


def parse_duration_s(value: str | None, option: str) -> float | None:
    if value is None:
        return None
    text = value.strip().lower()
    scale = 1.0
    for suffix, factor in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix):
            text, scale = text[: -len(suffix)], factor
            break
    try:
        seconds = float(text) * scale
    except ValueError:
        raise ConfigError(f"{value!r} is not a duration (e.g. 500ms, 3s, 2m or 2.5)", path=option) from None
    if seconds <= 0 and option != "--warmup":
        raise ConfigError(f"{value!r} must be more than zero", path=option)
    return seconds


# Set by `make run` to the seconds its build (the editable install, which compiles netarena-load) took: the
# run's first phase, which happens before netarena starts.
BUILD_TIME_ENV = "NETARENA_BUILD_S"


def _phase_times(runner_phase_s: dict[str, float], report_s: float) -> dict[str, float]:
    """Seconds per phase of the run, in order: build (when `make run` said), installs, measuring, report."""
    phases: dict[str, float] = {}
    try:
        phases["build"] = float(os.environ[BUILD_TIME_ENV])
    except (KeyError, ValueError):
        pass
    phases.update(runner_phase_s)
    phases["report"] = report_s
    return {name: round(s, 1) for name, s in phases.items()}


def _own_start_time() -> float:
    return psutil.Process().create_time()


def _run_overrides(repeat: int | None, duration: str | None, warmup: str | None, thresholds: tuple[str, ...],
                   precision_text: str | None = None) -> dict:
    """What `netarena run`'s options change in a suite (the one given, or the one --url builds)."""
    overrides: dict = {}
    if precision_text is not None:
        overrides["precision"] = precision_option(precision_text)
    if repeat is not None:
        overrides["repeat"] = repeat
    if duration is not None:
        overrides["duration_s"] = parse_duration_s(duration, "--duration")
    if warmup is not None:
        overrides["warmup_s"] = parse_duration_s(warmup, "--warmup")
    if thresholds:
        overrides["thresholds"] = list(thresholds)
    return overrides


def _override(suite: Suite, overrides: dict) -> Suite:
    if not overrides:
        return suite
    data = suite.model_dump(mode="json")
    overrides = dict(overrides)
    # --threshold adds to every entry's own thresholds.
    for entry in data["measure"]:
        entry["thresholds"] = [*entry.get("thresholds", []), *overrides.get("thresholds", [])]
    overrides.pop("thresholds", None)
    data.update(overrides)
    if "precision" in overrides and "repeat" not in overrides:
        # --precision makes the suite's repeat a minimum, which must be at least MIN_REPEATS.
        data["repeat"] = max(data["repeat"], MIN_REPEATS)
    # --duration / --warmup replace every timing of the suite, per-entry ones included.
    for key in ("duration_s", "warmup_s"):
        if key in overrides:
            for entry in data["measure"]:
                entry[key] = None
    try:
        effective = Suite.model_validate(data)
    except Exception as exc:  # e.g. --repeat 0
        if isinstance(exc, ValidationError):
            err = exc.errors()[0]
            option = {"repeat": "--repeat", "duration_s": "--duration", "warmup_s": "--warmup", "precision": "--precision",
                      "contestants": "--only"}.get(str(err["loc"][0]), str(err["loc"][0]))
            raise ConfigError(f"{err['msg']} (got {err.get('input')!r})", path=option) from None
        raise
    check_suite(effective, "command line")
    return effective


def resume_command(run_id: int, results_dir: Path, contestants_dir: Path) -> str:
    folder = "" if Path(contestants_dir) == default_contestants_dir().absolute() else \
        f" --contestants-dir {contestants_dir}"
    return f"netarena run --resume {run_id} --results {results_dir}{folder}"


def _same_manifests(store: Store, run_id: int, contestants: list, contestants_dir: Path) -> None:
    stored = {row["name"]: json.loads(row["manifest_json"]) for row in
              store.db.execute("SELECT name, manifest_json FROM contestants WHERE run_id=?", (run_id,))}
    for contestant in contestants:
        if contestant.name in stored and stored[contestant.name] != contestant.manifest.model_dump(mode="json"):
            raise ConfigError(f"the manifest of {contestant.name} in {contestants_dir} is not the one run {run_id} "
                              "started with", path="--resume",
                              hint="pass the --contestants-dir the run used, or start a new run")


def _find_resumable(store: Store, resume: str, results_dir: Path):
    if resume == "latest":
        row = store.latest_unfinished_run()
        if row is None:
            raise ConfigError(f"no unfinished run in {store.path}", path="--resume")
        return row
    try:
        run_id = int(resume)
    except ValueError:
        raise ConfigError(f"{resume!r} is not a run id (a number; `netarena export` lists them)",
                          path="--resume") from None
    row = store.run(run_id)
    if row is None:
        known = [str(r["id"]) for r in store.runs()]
        raise ConfigError(f"no run {run_id} in {store.path} (runs: {', '.join(known) or 'none'})", path="--resume")
    if row["status"] == "complete":
        raise ConfigError(f"run {run_id} is already complete", path="--resume")
    return row
