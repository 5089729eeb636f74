"""The machine fingerprint and the run's calibration: recorded by a real run, valid against the environment's
JSON Schema, true to this machine, shown in the report, and read by `compare` across machines."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import sqlite3
import subprocess
from pathlib import Path

import jsonschema
import pytest

from conftest import FIXTURE_CONTESTANTS, REPO, db_rows, run_cli, write_suite

SCHEMA = json.loads((REPO / "docs" / "schema" / "environment.schema.json").read_text())

SUITE = """name = "fingerprint"
contestants = ["fx-good", "fx-other"]
repeat = 2
warmup_s = 0.2
duration_s = 0.5
timeout_s = 1

[[measure]]
scenario = "hello"
connections = [4]
"""


def validate(environment: dict) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.Draft202012Validator(SCHEMA).validate(environment)


@pytest.fixture(scope="module")
def calibrated_store(tmp_path_factory, generator_binary) -> Path:
    """One real run (two fixture contestants, two repeats) in its own store; the store's directory."""
    tmp = tmp_path_factory.mktemp("fingerprint")
    cache = tmp / "cache"
    cache.mkdir()
    results = tmp / "results"
    suite = write_suite(tmp / "suite.toml", SUITE)
    # The tests leave the calibration out (tests/conftest.py); this run is the one that takes it.
    done = run_cli(["run", suite, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS, "--quiet"], cache,
                   NETARENA_CALIBRATION="1")
    assert done.returncode == 0, done.stderr
    return results


def stored_environment(results: Path, run_id: int = 1) -> dict:
    return json.loads(db_rows(results, "SELECT environment_json FROM runs WHERE id=?", (run_id,))[0][0])


def test_a_real_runs_environment_validates_against_the_schema(calibrated_store):
    validate(stored_environment(calibrated_store))


def test_the_schema_rejects_a_calibration_without_its_figures(calibrated_store):
    """The schema checks the fingerprint and calibration fields, not just that there is an object."""
    env = stored_environment(calibrated_store)
    for broken in ({**env, "calibration": {"cpu_loop": env["calibration"]["cpu_loop"], "reference": {"rps": 1}}},
                   {**env, "calibration": {"cpu_loop": {**env["calibration"]["cpu_loop"], "us_per_unit": -1},
                                           "reference": env["calibration"]["reference"]}},
                   {**env, "cpu": {**env["cpu"], "flags": {"sha256_16": "not hex", "count": 1, "list": ["x"]}}},
                   {k: v for k, v in env.items() if k != "steal_at_start"}):
        with pytest.raises(jsonschema.ValidationError):
            validate(broken)


def test_the_fingerprint_is_this_machines(calibrated_store):
    env = stored_environment(calibrated_store)
    cpuinfo = Path("/proc/cpuinfo").read_text()
    flags_line = next(line for line in cpuinfo.splitlines() if line.split(":")[0].strip() in ("flags", "Features"))
    flags = sorted(set(flags_line.split(":", 1)[1].split()))
    assert env["cpu"]["flags"]["list"] == flags
    assert env["cpu"]["flags"]["sha256_16"] == hashlib.sha256(" ".join(flags).encode()).hexdigest()[:16]
    vulnerabilities = Path("/sys/devices/system/cpu/vulnerabilities")
    if vulnerabilities.is_dir():
        assert env["cpu"]["mitigations"] == {p.name: p.read_text().strip() for p in vulnerabilities.iterdir()}
    source = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource")
    if source.exists():
        assert env["clocksource"] == source.read_text().strip()
    assert env["steal_at_start"] is None or 0 <= env["steal_at_start"]["pct"] <= 100


def test_the_calibration_ran_on_the_runs_cpus_with_the_fixed_loop(calibrated_store, generator_binary):
    calibration = stored_environment(calibrated_store)["calibration"]
    loop, reference = calibration["cpu_loop"], calibration["reference"]
    assert loop["cpu"] == 0  # the server's first CPU (the default split: server 0, generator 1)
    # The loop's result is a pure function of its units: the same here as in a fresh run of the same command.
    fresh = json.loads(subprocess.run([generator_binary, "calibrate", "cpu", "--units", str(loop["units"])],
                                      capture_output=True, text=True, check=True, timeout=120).stdout)
    assert fresh["checksum"] == loop["checksum"] and fresh["unit_version"] == loop["unit_version"]
    assert reference["errors"] == 0 and reference["responses"] > 0
    # Each figure is the median of its samples (one server start, REFERENCE_SAMPLES loads).
    from statistics import median

    from netarena.calibration import REFERENCE_SAMPLES

    samples = reference["samples"]
    assert len(samples) == REFERENCE_SAMPLES
    for name in ("rps", "server_cpu_us_per_req", "generator_cpu_us_per_req"):
        assert reference[name] == pytest.approx(median(s[name] for s in samples), rel=1e-3), name
    assert min(s["rps"] for s in samples) <= reference["responses"] / reference["duration_s"] <= max(
        s["rps"] for s in samples)
    assert reference["server_cpu_us_per_req"] > 0 and reference["generator_cpu_us_per_req"] > 0


def test_the_report_shows_calibration_and_relative_figures(calibrated_store, tmp_path):
    from netarena.report.model import load_report

    report = load_report(calibrated_store, 1)
    reference = stored_environment(calibrated_store)["calibration"]["reference"]
    for g in report.groups:
        assert g.requests_per_s_vs_reference == pytest.approx(g.requests_per_s_median / reference["rps"])
        assert g.server_cpu_per_req_vs_reference == pytest.approx(
            g.server_cpu_us_median / reference["server_cpu_us_per_req"])
    shown = run_cli(["show", "1", "--results", calibrated_store], tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "calibration: reference pair" in shown.stdout and "relative to the reference pair" in shown.stdout
    for g in report.groups:
        line = next(line for line in shown.stdout.splitlines() if line.startswith(g.contestant + " ")
                    and "hello" in line and "×" in line)
        assert f"{g.requests_per_s_vs_reference:.3g}×" in line, line
    page = tmp_path / "report.html"
    written = run_cli(["report", "1", "--results", calibrated_store, "-o", page], tmp_path)
    assert written.returncode == 0, written.stderr
    html = page.read_text()
    assert "calibration: CPU loop" in html and 'id="relative"' in html
    cells = re.findall(r'<tr data-contestant="([^"]+)" data-scenario="hello"[^>]*>.*?class="num rel-rps">([^<]+)<', html)
    assert sorted(c for c, _ in cells) == ["fx-good", "fx-other"]
    exported = run_cli(["export", "1", "--results", calibrated_store, "--csv"], tmp_path)
    assert exported.returncode == 0, exported.stderr
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    for row in rows:
        assert float(row["requests_per_s_vs_reference"]) == pytest.approx(
            float(row["requests_per_s"]) / reference["rps"])


def _copy_run_as_another_machine(store: Path) -> None:
    """Run 1 again as run 2, recorded on another machine: a different host name and CPU flags, and its
    reference pair half as fast (the measurements' own figures unchanged)."""
    db = sqlite3.connect(store / "netarena.sqlite")
    try:
        columns = [r[1] for r in db.execute("PRAGMA table_info(runs)") if r[1] != "id"]
        db.execute(f"INSERT INTO runs ({', '.join(columns)}) SELECT {', '.join(columns)} FROM runs WHERE id=1")
        env = json.loads(db.execute("SELECT environment_json FROM runs WHERE id=2").fetchone()[0])
        env["hostname"] = "another-host"
        env["cpu"]["flags"]["sha256_16"] = "0123456789abcdef"
        env["calibration"]["reference"]["rps"] /= 2
        db.execute("UPDATE runs SET environment_json=? WHERE id=2", (json.dumps(env),))
        names = [r[1] for r in db.execute("PRAGMA table_info(measurements)") if r[1] not in ("id", "run_id")]
        db.execute(f"INSERT INTO measurements (run_id, {', '.join(names)}) SELECT 2, {', '.join(names)} "
                   "FROM measurements WHERE run_id=1")
        db.commit()
    finally:
        db.close()


def test_compare_across_machines_says_so_and_compares_relative_figures(calibrated_store, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (store / "netarena.sqlite").write_bytes((calibrated_store / "netarena.sqlite").read_bytes())
    _copy_run_as_another_machine(store)
    compared = run_cli(["compare", "1", "2", "--results", store, "--json"], tmp_path)
    assert compared.returncode == 0, compared.stderr
    doc = json.loads(compared.stdout)
    assert doc["machines"]["different"] is True
    assert set(doc["machines"]["differences"]) == {"hostname", "cpu_flags"}
    for row in doc["rows"]:
        assert row["rps"]["ratio"] == pytest.approx(1.0)  # the same measurements...
        assert row["rps_vs_reference"]["ratio"] == pytest.approx(2.0)  # ...against a reference half as fast
        assert row["server_cpu_per_req_vs_reference"]["ratio"] == pytest.approx(1.0)
    text = run_cli(["compare", "1", "2", "--results", store], tmp_path)
    assert text.returncode == 0, text.stderr
    assert "different machines (hostname, cpu_flags differ)" in text.stdout
    assert "relative to each run's reference pair" in text.stdout
    same = run_cli(["compare", "1", "1", "--results", store, "--json"], tmp_path)
    assert json.loads(same.stdout)["machines"]["different"] is False


def test_compare_html_has_a_relative_table_across_machines(calibrated_store, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (store / "netarena.sqlite").write_bytes((calibrated_store / "netarena.sqlite").read_bytes())
    _copy_run_as_another_machine(store)
    page = tmp_path / "compare.html"
    done = run_cli(["compare", "1", "2", "--results", store, "-o", page], tmp_path)
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    assert 'class="machines" data-different="1"' in html
    relative = re.findall(r'<tr class="relative" data-contestant="([^"]+)".*?class="num rel-rps">([0-9.]+) ', html)
    assert sorted(c for c, _ in relative) == ["fx-good", "fx-other"]
    assert all(float(ratio) == pytest.approx(2.0, abs=0.001) for _, ratio in relative)


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_a_run_without_calibration_says_so_and_starts_no_reference_server(tmp_path, cache_dir, how):
    """--no-calibration (or NETARENA_CALIBRATION=0) leaves the yardsticks out: no reference server or CPU loop is
    started, the run's environment says why there is no calibration, and its report has no relative figures."""
    results = tmp_path / "results"
    suite = write_suite(tmp_path / "suite.toml", SUITE.replace("repeat = 2", "repeat = 1"))
    args = ["run", suite, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS]
    if how == "flag":
        done = run_cli([*args, "--no-calibration"], cache_dir, NETARENA_CALIBRATION="1")
    else:
        done = run_cli(args, cache_dir, NETARENA_CALIBRATION="0")
    assert done.returncode == 0, done.stderr
    assert "calibrating" not in done.stdout + done.stderr
    env = stored_environment(results)
    assert env["calibration"] == {"skipped": "not taken: --no-calibration (NETARENA_CALIBRATION=0)"}, env
    validate(env)
    shown = run_cli(["show", "1", "--results", results], tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "calibration: none: not taken: --no-calibration" in " ".join(shown.stdout.split())
    assert "relative to the reference pair" not in shown.stdout


def test_a_calibration_setting_that_is_not_a_boolean_is_refused_before_anything_starts(tmp_path, cache_dir):
    results = tmp_path / "results"
    suite = write_suite(tmp_path / "suite.toml", SUITE)
    done = run_cli(["run", suite, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS], cache_dir,
                   NETARENA_CALIBRATION="sometimes")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "'sometimes' is not a valid boolean" in done.stderr and "NETARENA_CALIBRATION" in done.stderr, done.stderr
    assert not results.exists()
