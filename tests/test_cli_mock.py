"""The CLI end to end on the mock backend: fast and deterministic (no generator, no servers)."""

from __future__ import annotations

import csv
import io
import json
import re

from conftest import FIXTURE_CONTESTANTS, db_rows, run_cli, write_suite

SUITE = """name = "mocked"
contestants = ["fx-good", "fx-other"]
repeat = 3
warmup_s = 0
duration_s = 1

[[measure]]
scenario = "hello"
connections = [4, 8]

[[measure]]
scenario = "echo"
connections = [2]
"""


def test_mock_run_interleaves_stores_and_exports(tmp_path, cache_dir):
    suite = write_suite(tmp_path / "s.toml", SUITE)
    results = tmp_path / "results"
    result = run_cli(["run", suite, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS, "--json"],
                     cache_dir, NETARENA_BACKEND="mock")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    # fx-good: hello x2 levels + echo; fx-other: hello x2 levels (no echo: a recorded skip).
    assert summary["measurements"] == {"planned": 15, "ok": 15, "failed": 0, "interrupted": 0, "threshold_failed": 0,
                                       "discarded": 0, "discarded_reasons": [], "profiled": []}
    assert [s["reason"] for s in summary["skipped"]] == ["does not implement echo: fixture"]
    rows = db_rows(results, "SELECT contestant, scenario, level_key, repeat_index FROM measurements ORDER BY id")
    order = [tuple(r) for r in rows]
    # A B A B ... within a round, and every round before the next repeat (never A A A).
    assert order[:5] == [("fx-good", "hello", "c=4,w=1", 0), ("fx-other", "hello", "c=4,w=1", 0),
                         ("fx-good", "hello", "c=8,w=1", 0), ("fx-other", "hello", "c=8,w=1", 0),
                         ("fx-good", "echo", "c=2,w=1", 0)]
    assert [r[3] for r in order] == [0] * 5 + [1] * 5 + [2] * 5
    group = next(g for g in summary["groups"] if g["contestant"] == "fx-good" and g["level_key"] == "c=4,w=1"
                 and g["scenario"] == "hello")
    assert group["requests_per_s_min"] < group["requests_per_s_median"] < group["requests_per_s_max"]
    assert group["repeats_ok"] == 3 and group["flags"] == []
    [run] = db_rows(results, "SELECT * FROM runs")
    assert run["status"] == "complete" and json.loads(run["server_cpus_json"]) != json.loads(run["generator_cpus_json"])
    assert json.loads(run["environment_json"])  # the fingerprint is stored

    exported = run_cli(["export", "--results", results, "--csv"], cache_dir)
    assert exported.returncode == 0, exported.stderr
    table = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert len(table) == 15 and {r["status"] for r in table} == {"ok"}
    exported = run_cli(["export", "1", "--results", results, "--json"], cache_dir)
    document = json.loads(exported.stdout)
    assert len(document["measurements"]) == 15
    assert document["measurements"][0]["generator"]["latency"]["histogram"]["data"].startswith("HISTF")

    again = run_cli(["run", "--resume", "1", "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS], cache_dir,
                    NETARENA_BACKEND="mock")
    assert again.returncode == 2 and "already complete" in again.stderr


def test_export_errors(tmp_path, cache_dir):
    result = run_cli(["export", "--results", tmp_path / "nothing", "--json"], cache_dir)
    assert result.returncode == 2 and "no store at" in result.stderr
    result = run_cli(["export", "--results", tmp_path], cache_dir)
    assert result.returncode == 2 and "--json, --csv or --markdown" in result.stderr


def test_list_reports_why_a_contestant_cannot_run(tmp_path, cache_dir):
    folder = tmp_path / "contestants" / "fx-missing"
    folder.mkdir(parents=True)
    text = (FIXTURE_CONTESTANTS / "fx-other" / "contestant.toml").read_text()
    (folder / "contestant.toml").write_text(text.replace('name = "fx-other"', 'name = "fx-missing"').replace(
        'requires = ["python3"]', 'requires = ["python3", "netarena-no-such-tool"]'))
    result = run_cli(["list", "--contestants-dir", tmp_path / "contestants", "--json"], cache_dir)
    assert result.returncode == 0, result.stderr
    [entry] = json.loads(result.stdout)["contestants"]
    assert entry["runnable"] is False
    assert entry["reasons"] == ["netarena-no-such-tool not installed: install netarena-no-such-tool and put it on PATH"]
    assert entry["scenarios"]["echo"] == "fixture" and entry["scenarios"]["hello"] is None


def test_list_groups_contestants_by_language_then_model(tmp_path, cache_dir):
    base = (FIXTURE_CONTESTANTS / "fx-other" / "contestant.toml").read_text()
    for name, language, model in (("fx-py-loop", "python", "event-loop"), ("fx-go", "go", "goroutines"),
                                  ("fx-py-threads", "python", "threads"), ("fx-java-vt", "java", "virtual-threads")):
        folder = tmp_path / "contestants" / name
        folder.mkdir(parents=True)
        text = re.sub(r'(?m)^concurrency_model = .*$', f'concurrency_model = "{model}"', base)
        text = re.sub(r'(?m)^language = .*$', f'language = "{language}"', text)
        (folder / "contestant.toml").write_text(text.replace('name = "fx-other"', f'name = "{name}"'))
    listed = run_cli(["list", "--contestants-dir", tmp_path / "contestants", "--json"], cache_dir)
    assert listed.returncode == 0, listed.stderr
    groups = {c["name"]: c["model_group"] for c in json.loads(listed.stdout)["contestants"]}
    assert groups == {"fx-py-loop": "event loop", "fx-go": "green threads", "fx-py-threads": "threads",
                      "fx-java-vt": "virtual threads"}
    table = run_cli(["list", "--contestants-dir", tmp_path / "contestants"], cache_dir, COLUMNS="200")
    assert table.returncode == 0, table.stderr
    order = [name for line in table.stdout.splitlines() for name in groups if f"│ {name} " in line]
    # language first (go, java, python), then the model's group within a language.
    assert order == ["fx-go", "fx-java-vt", "fx-py-loop", "fx-py-threads"]
    assert "green threads (goroutines)" in table.stdout


def test_list_names_the_frameworks_that_are_not_contestants_and_refuses_a_bad_entry(tmp_path, cache_dir):
    folder = tmp_path / "contestants" / "fx-other"
    folder.mkdir(parents=True)
    (folder / "contestant.toml").write_text((FIXTURE_CONTESTANTS / "fx-other" / "contestant.toml").read_text())
    not_here = tmp_path / "contestants" / "not-here.toml"
    not_here.write_text('[[framework]]\nframework = "Bun"\nlanguage = "javascript"\nreason = "backlog fixed at 512"\n')
    listed = run_cli(["list", "--contestants-dir", tmp_path / "contestants", "--json"], cache_dir)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["not_here"] == [{"framework": "Bun", "language": "javascript",
                                                      "reason": "backlog fixed at 512"}]
    table = run_cli(["list", "--contestants-dir", tmp_path / "contestants"], cache_dir, COLUMNS="200")
    assert "not here: Bun (javascript): backlog fixed at 512" in table.stdout, table.stdout
    markdown = run_cli(["list", "--contestants-dir", tmp_path / "contestants", "--markdown"], cache_dir)
    assert "| Bun | javascript | backlog fixed at 512 |" in markdown.stdout, markdown.stdout

    not_here.write_text('[[framework]]\nframework = "Bun"\nlanguage = "javascript"\nwhy = "backlog"\n')
    refused = run_cli(["list", "--contestants-dir", tmp_path / "contestants"], cache_dir)
    assert refused.returncode == 2 and "not-here.toml" in refused.stderr and "why" in refused.stderr, refused.stderr


def test_a_stop_whose_exception_was_swallowed_still_stops_the_run(tmp_path, cache_dir, monkeypatch):
    """Ctrl-C raised inside code that ignores exceptions (logging's at-fork handler did this while a server
    was forked) must still stop the run after the current measurement, keep it, and exit 130."""
    import os
    import signal

    from click.testing import CliRunner

    from netarena.backends.mock import MockBackend
    from netarena.cli import main as cli
    from netarena.errors import EXIT_INTERRUPTED

    measure = MockBackend.measure

    def measure_then_swallow_a_sigint(self, req, progress=lambda text: None):
        try:
            os.kill(os.getpid(), signal.SIGINT)
        except BaseException:  # what "Exception ignored in ..." does to the KeyboardInterrupt
            pass
        return measure(self, req, progress)

    monkeypatch.setattr(MockBackend, "measure", measure_then_swallow_a_sigint)
    monkeypatch.setenv("NETARENA_CACHE", str(cache_dir))
    suite = write_suite(tmp_path / "s.toml", SUITE)
    results = tmp_path / "results"
    before = signal.getsignal(signal.SIGINT)
    out = CliRunner().invoke(cli, ["run", str(suite), "--results", str(results), "--contestants-dir",
                                     str(FIXTURE_CONTESTANTS)], env={"NETARENA_BACKEND": "mock"})
    assert out.exit_code == EXIT_INTERRUPTED, out.output
    assert "netarena run --resume 1" in out.output
    # The one measurement made has its report, marked partial, and the resume message says where it is.
    report = results / "report-run-1.html"
    assert f"partial report: {report}" in out.output
    page = report.read_text()
    assert '<p class="partial" data-partial="interrupted">' in page and "after 1 of 15 planned measurements" in page
    # The fx-good hello c=4 measurement's rows (results, cost per request), nothing invented.
    assert set(re.findall(r'<tr data-contestant="([^"]*)" data-level="([^"]*)"', page)) == {("fx-good", "c=4,w=1")}
    assert signal.getsignal(signal.SIGINT) is before  # the CLI put the previous handler back
    rows = db_rows(results, "SELECT status FROM measurements")
    assert [r["status"] for r in rows] == ["ok"]  # the measurement that was running is kept, nothing after it
    [run] = db_rows(results, "SELECT status FROM runs")
    assert run["status"] != "complete"


def test_a_report_that_fails_to_render_is_one_warning_not_a_traceback(tmp_path, cache_dir, monkeypatch):
    """The measurements are stored before the report is drawn: a renderer bug must not turn a finished run
    into a traceback, and `netarena report` can write the page later from the same store."""
    from click.testing import CliRunner

    from netarena.cli import main as cli
    from netarena.report import html

    def broken_render(report):
        raise RuntimeError("renderer bug\non two lines")

    monkeypatch.setattr(html, "render", broken_render)
    monkeypatch.setenv("NETARENA_CACHE", str(cache_dir))
    suite = write_suite(tmp_path / "s.toml", SUITE.replace("repeat = 3", "repeat = 1"))
    results = tmp_path / "results"
    out = CliRunner().invoke(cli, ["run", str(suite), "--results", str(results), "--contestants-dir",
                                     str(FIXTURE_CONTESTANTS)], env={"NETARENA_BACKEND": "mock", "COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    assert out.exception is None or isinstance(out.exception, SystemExit)
    assert "Traceback" not in out.output
    [warning] = [line for line in out.output.splitlines() if line.startswith("warning: HTML report")]
    assert warning == (f"warning: HTML report not written (RuntimeError: renderer bug on two lines); the results "
                       f"are in {results / 'netarena.sqlite'}; `netarena report 1 --results {results}` writes it")
    assert "hello · c=4,w=1" in out.output  # the terminal summary still printed
    assert not (results / "report-run-1.html").exists()
    monkeypatch.undo()
    later = CliRunner().invoke(cli, ["report", "1", "--results", str(results)])
    assert later.exit_code == 0, later.output
    assert (results / "report-run-1.html").read_bytes().startswith(b"<!DOCTYPE html>")


def test_a_contestants_warmup_min_raises_its_warmup_only_and_is_marked(tmp_path, cache_dir):
    import shutil

    contestants = tmp_path / "contestants"
    shutil.copytree(FIXTURE_CONTESTANTS, contestants)
    manifest = contestants / "fx-other" / "contestant.toml"
    manifest.write_text(manifest.read_text().replace("stop_timeout_s = 2", "stop_timeout_s = 2\nwarmup_min_s = 7.5"))
    suite = write_suite(tmp_path / "s.toml", SUITE.replace("repeat = 3", "repeat = 1"))
    results = tmp_path / "results"
    result = run_cli(["run", suite, "--results", results, "--contestants-dir", contestants], cache_dir,
                     NETARENA_BACKEND="mock")
    assert result.returncode == 0, result.stderr
    assert "fx-other: warm-up 7.5 s instead of 0 s (its start.warmup_min_s" in result.stderr + result.stdout
    exported = json.loads(run_cli(["export", "1", "--results", results, "--json"], cache_dir).stdout)
    warmups = {(m["contestant"], m["scenario"]): (m["generator"]["warmup_s"], "warmup_raised" in m["flags"])
               for m in exported["measurements"]}
    assert warmups == {("fx-good", "hello"): (0, False), ("fx-good", "echo"): (0, False),
                       ("fx-other", "hello"): (7.5, True)}
    summary = run_cli(["show", "--results", results], cache_dir, COLUMNS="160")
    assert summary.returncode == 0, summary.stderr
    rows = [line for line in summary.stdout.splitlines()
            if "fx-" in line and not line.startswith(("skipped", "flagged", "  generator CPU"))]  # the table rows
    assert len(rows) == 5  # hello at c=4 and c=8 for both, echo for fx-good
    assert all(("WARM" in row) == ("fx-other" in row) for row in rows), rows
    assert "WARM = longer warm-up" in summary.stdout


def test_a_negative_warmup_min_is_refused_with_the_field_named(tmp_path, cache_dir):
    import shutil

    contestants = tmp_path / "contestants"
    shutil.copytree(FIXTURE_CONTESTANTS, contestants)
    manifest = contestants / "fx-other" / "contestant.toml"
    manifest.write_text(manifest.read_text().replace("stop_timeout_s = 2", "stop_timeout_s = 2\nwarmup_min_s = -1"))
    result = run_cli(["run", write_suite(tmp_path / "s.toml", SUITE), "--results", tmp_path / "results",
                      "--contestants-dir", contestants], cache_dir, NETARENA_BACKEND="mock")
    assert result.returncode == 2
    assert "warmup_min_s" in result.stderr and "fx-other" in result.stderr
    assert not (tmp_path / "results" / "netarena.sqlite").exists()


def test_services_cpus_must_exist_and_stay_off_the_server(tmp_path, cache_dir):
    body = 'name = "s"\n[cpus]\nserver = [0]\ngenerator = [1]\nservices = [{cpus}]\n' \
           '[[measure]]\nscenario = "mongo"\nconnections = [4]\n'
    results = tmp_path / "results"
    unknown = run_cli(["run", write_suite(tmp_path / "a.toml", body.format(cpus=4096)), "--results", results,
                       "--contestants-dir", FIXTURE_CONTESTANTS], cache_dir, NETARENA_BACKEND="mock")
    assert unknown.returncode == 2 and "cpus.services" in unknown.stderr and "[4096]" in unknown.stderr
    overlap = run_cli(["run", write_suite(tmp_path / "b.toml", body.format(cpus=0)), "--results", results,
                       "--contestants-dir", FIXTURE_CONTESTANTS], cache_dir, NETARENA_BACKEND="mock")
    assert overlap.returncode == 2 and "services and server CPU sets overlap" in overlap.stderr
    assert not (results / "netarena.sqlite").exists()  # nothing half-done


def test_precision_option_repeats_until_precise_interleaved(tmp_path, cache_dir):
    """--precision on the mock backend, whose repeats cycle through -2%, 0, +2% of a base: within ±5% after the
    minimum (stops there), never within ±1% (every group runs to the default repeat budget, 20), the extra
    rounds interleaved across contestants as the first ones are."""
    suite = write_suite(tmp_path / "s.toml", SUITE.replace("repeat = 3", "repeat = 1"))
    common = ["--contestants-dir", FIXTURE_CONTESTANTS, "--scenario", "hello"]
    wide = run_cli(["run", suite, "--results", tmp_path / "a", *common, "--precision", "5%"], cache_dir,
                   NETARENA_BACKEND="mock")
    assert wide.returncode == 0, wide.stderr
    rows = db_rows(tmp_path / "a", "SELECT repeat_index FROM measurements")
    assert sorted(r[0] for r in rows) == [0] * 4 + [1] * 4 + [2] * 4  # repeat = 1 raised to the minimum, 3
    [run] = db_rows(tmp_path / "a", "SELECT suite_json FROM runs")
    assert json.loads(run["suite_json"])["precision"] == "5%" and json.loads(run["suite_json"])["repeat"] == 3
    shown = json.loads(run_cli(["show", "--results", tmp_path / "a", "--json"], cache_dir).stdout)
    assert {g["stopped_because"] for g in shown["groups"]} == {"precise"}
    assert "stopped: precise" in wide.stdout

    narrow = run_cli(["run", suite, "--results", tmp_path / "b", *common, "--precision", "1%"], cache_dir,
                     NETARENA_BACKEND="mock")
    assert narrow.returncode == 0, narrow.stderr
    order = [tuple(r) for r in db_rows(tmp_path / "b", "SELECT contestant, level_key, repeat_index FROM "
                                                         "measurements ORDER BY id")]
    assert len(order) == 4 * 20
    # every round, extra ones included, measures each group once before the next round starts
    assert [r[2] for r in order] == [i for i in range(20) for _ in range(4)]
    assert order[12:16] == [("fx-good", "c=4,w=1", 3), ("fx-other", "c=4,w=1", 3), ("fx-good", "c=8,w=1", 3),
                            ("fx-other", "c=8,w=1", 3)]
    shown = json.loads(run_cli(["show", "--results", tmp_path / "b", "--json"], cache_dir).stdout)
    assert {g["stopped_because"] for g in shown["groups"]} == {"repeat budget"}
    assert {g["requests_per_s_ci_kind"] for g in shown["groups"]} == {"95% CI"}
