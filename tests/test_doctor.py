"""`netarena doctor` against this machine's real limits and /proc/sys."""

from __future__ import annotations

import io
import json
import os
import pickle
import resource
import sys
from pathlib import Path

import pytest
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from netarena import doctor, envinfo  # noqa: E402


def _console(width: int = 100) -> Console:
    return Console(file=io.StringIO(), width=width, record=True, color_system=None)


def _snapshot() -> dict[str, str | None]:
    names = set(envinfo.SYSCTLS)
    return {name: envinfo.read_sysctl(name) for name in sorted(names)}


def _in_child(fn) -> object:
    """Run fn in a forked child (so setuid/affinity changes cannot leak) and return its result."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            payload = pickle.dumps(("ok", fn()))
        except BaseException as exc:  # report, never fall back into pytest inside the child
            payload = pickle.dumps(("error", repr(exc)))
        with os.fdopen(write_fd, "wb") as out:
            out.write(payload)
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as inp:
        kind, value = pickle.loads(inp.read())
    os.waitpid(pid, 0)
    assert kind == "ok", value
    return value


def test_report_changes_nothing_and_states_the_real_limits():
    before = _snapshot()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    console = _console(width=400)  # wide enough that no sentence wraps inside a cell
    code = doctor.run_doctor(False, console)
    text = console.export_text()
    assert _snapshot() == before
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (soft, hard)
    assert code in (0, 1)
    assert str(hard) in text
    assert f"at most ~{hard - doctor.FD_SPARE:,} concurrent connections" in text
    low, high = (int(v) for v in before["net.ipv4.ip_local_port_range"].split())
    assert f"{high - low + 1:,} connections per source address" in text
    assert "Applying" not in text


def test_output_fits_100_columns():
    console = _console()
    doctor.run_doctor(False, console)
    lines = console.export_text().splitlines()
    assert len(lines) > 10
    assert max(len(line) for line in lines) <= 100


def test_every_non_ok_check_has_a_fix_or_says_why_not():
    for check in doctor.collect_checks():
        assert check.status in ("ok", "warn", "fail")
        if check.status != "ok":
            assert check.fix or check.manual_only, check


def test_max_connections_is_the_smaller_of_fds_and_ports():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low, high = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    assert doctor.max_connections() == min(hard - doctor.FD_SPARE, high - low + 1)


def test_a_single_cpu_fails_the_split_check_and_the_exit_code():
    def run() -> tuple[int, str]:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        console = _console()
        return doctor.run_doctor(False, console), console.export_text()

    code, text = _in_child(run)
    assert code == 1
    assert "only one CPU available" in text


def test_apply_without_root_refuses_and_changes_nothing():
    before = _snapshot()

    def run() -> tuple[int, str]:
        if os.geteuid() == 0:
            os.setgid(65534)
            os.setuid(65534)
        console = _console()
        return doctor.run_doctor(True, console), console.export_text()

    code, text = _in_child(run)
    assert code == 2
    assert "needs root" in text
    assert _snapshot() == before


@pytest.mark.skipif(os.geteuid() != 0, reason="apply needs root")
def test_apply_writes_recommended_sysctls_reports_them_and_is_restored():
    # With nothing pending (a tuned machine) the test still runs: apply must then change nothing.
    pending = [c for c in doctor.collect_checks() if c.status != "ok" and c.sysctl]
    before = _snapshot()
    try:
        console = _console(width=400)
        doctor.run_doctor(True, console)
        text = console.export_text()
        for check in pending:
            name, value = check.sysctl
            now = envinfo.read_sysctl(name)
            if now == " ".join(value.split()):
                assert f"changed {name}: {before[name]} → {now}" in text
            else:  # e.g. a read-only /proc/sys: must be said, not hidden
                assert f"could not change {name}" in text
        # Settings that were already fine are left alone.
        untouched = {n for n in before if n not in {c.sysctl[0] for c in pending}}
        after = _snapshot()
        assert {n: after[n] for n in untouched} == {n: before[n] for n in untouched}
        # Per-process limits cannot be applied; that is reported, not skipped silently.
        if any(c.name == "open files (process)" and c.status != "ok" for c in doctor.collect_checks()):
            assert "not changed open files (process)" in text
            _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            if doctor.can_raise_open_files_hard_limit(doctor.RECOMMENDED_OPEN_FILES):
                assert "root may raise it here" in text
            else:
                assert f"may not raise its hard limit above {hard}" in text
    finally:
        for name, value in before.items():
            if value is not None and envinfo.read_sysctl(name) != value:
                envinfo.sysctl_path(name).write_text(value + "\n")
    assert _snapshot() == before


def test_hard_limit_probe_tells_allowed_from_forbidden():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert doctor.can_raise_open_files_hard_limit(hard)  # keeping it is always allowed
    nr_open = int(Path("/proc/sys/fs/nr_open").read_text())
    assert not doctor.can_raise_open_files_hard_limit(nr_open + 1)  # the kernel's ceiling
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[1] == hard  # probed in a child only


def _profile_values(name: str) -> dict[str, str]:
    return {sysctl: " ".join(value.split()) for sysctl, value in doctor.PROFILES[name]}


def test_every_sysctl_a_profile_sets_is_recorded_with_a_run():
    for name in doctor.PROFILES:
        assert set(_profile_values(name)) <= set(envinfo.SYSCTLS), name
    recorded = envinfo.collect()["sysctls"]
    assert recorded["net.core.rmem_default"] == envinfo.read_sysctl("net.core.rmem_default")


def test_restore_with_nothing_saved_is_refused(tmp_path, cache_dir):
    from conftest import run_cli

    before = _snapshot()
    result = run_cli(["doctor", "--restore"], cache_dir)
    assert result.returncode == 2
    assert "nothing to restore" in result.stdout + result.stderr and str(cache_dir) in result.stdout + result.stderr
    assert _snapshot() == before


def test_profile_and_restore_refused_without_root():
    before = _snapshot()

    def run() -> tuple[int, int, str]:
        os.setgid(65534)
        os.setuid(65534)
        console = _console()
        return doctor.apply_profile("seed-000", console), doctor.restore_saved(console), console.export_text()

    if os.geteuid() != 0:
        code_apply, code_restore = doctor.apply_profile("seed-000", _console()), doctor.restore_saved(_console())
    else:
        code_apply, code_restore, _ = _in_child(run)
    assert (code_apply, code_restore) == (2, 2)
    assert _snapshot() == before


@pytest.mark.skipif(os.geteuid() != 0, reason="writing /proc/sys needs root")
def test_profile_applies_the_seed_settings_and_restore_puts_back_the_originals(cache_dir):
    from conftest import run_cli

    wanted = _profile_values("seed-000")
    before = _snapshot()
    try:
        applied = run_cli(["doctor", "--profile", "seed-000"], cache_dir)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        assert {name: envinfo.read_sysctl(name) for name in wanted} == wanted
        saved = json.loads((cache_dir / doctor.SAVED_FILE).read_text())
        assert saved["values"] == {name: before[name] for name in wanted}
        # A second application keeps the first one's originals (not the profile's own values).
        again = run_cli(["doctor", "--profile", "seed-000"], cache_dir)
        assert again.returncode == 0, again.stdout + again.stderr
        assert json.loads((cache_dir / doctor.SAVED_FILE).read_text())["values"] == saved["values"]
        restored = run_cli(["doctor", "--restore"], cache_dir)
        assert restored.returncode == 0, restored.stdout + restored.stderr
        assert _snapshot() == before
        assert not (cache_dir / doctor.SAVED_FILE).exists()
    finally:
        for name, value in before.items():
            if value is not None and envinfo.read_sysctl(name) != value:
                envinfo.sysctl_path(name).write_text(value + "\n")
    assert _snapshot() == before


def test_noise_checks_state_the_machines_steal_and_timer_lateness():
    checks = {c.name: c for c in doctor.collect_checks()}
    steal, timer = checks["CPU steal"], checks["timer noise"]
    assert steal.status in ("ok", "warn") and timer.status in ("ok", "warn")
    assert steal.value.endswith(f"% over {doctor.STEAL_SAMPLE_S:g} s") or steal.value == "unknown"
    assert timer.value.startswith("late p50 ") and " µs, p99 " in timer.value
    # A sleep never returns early: lateness is never negative, and p50 <= p99 by construction of the sort.
    p50_us, p99_us = doctor.timer_lateness_us(samples=20)
    assert 0 <= p50_us <= p99_us
    found = doctor.machine_steal_pct(0.2)
    assert found is None or 0.0 <= found <= 100.0


def test_cpu_speed_check_times_the_fixed_loop_on_each_cpu_a_run_uses():
    """The check runs netarena-load's fixed CPU loop on the server's and the generator's CPU and states each
    one's median and slowest unit against its fastest; a median more than STEADINESS_WARN_PCT above warns."""
    (check,) = [c for c in doctor.collect_checks() if c.name == "CPU speed"]
    available = sorted(os.sched_getaffinity(0))
    parts = check.value.split("; ")
    assert [p.split(":")[0] for p in parts] == [f"CPU {c}" for c in available[:2]], check.value
    medians = []
    for part in parts:
        _, figures = part.split(": ")
        median, slowest = figures.split(", ")
        assert median.startswith("median +") and slowest.startswith("slowest +"), part
        medians.append(float(median.removeprefix("median +").rstrip("%")))
        # The median unit is never faster than the fastest, nor slower than the slowest.
        assert 0.0 <= medians[-1] <= float(slowest.removeprefix("slowest +").rstrip("%")) + 0.5, part
    assert check.status == ("warn" if max(medians) > doctor.STEADINESS_WARN_PCT else "ok"), check


def test_generator_check_names_the_build_and_warns_when_it_is_not_the_release_one(tmp_path, monkeypatch,
                                                                                   generator_binary):
    """The generator a run would use, with the cargo profile its --version names: another build than release
    (make test's) warns and says how to get the measured one; the real binary's check names its own build."""
    from netarena.generator_build import generator_version

    monkeypatch.setenv("NETARENA_LOAD", str(generator_binary))
    check = doctor._check_generator_build()
    assert check in [c for c in doctor.collect_checks() if c.name == "load generator"]
    says = generator_version(generator_binary)
    assert check.value == f"{says} at {generator_binary}"
    assert check.status == ("ok" if says.endswith("(release build)") else "warn"), check
    fake = tmp_path / "netarena-load"
    fake.write_text('#!/bin/sh\necho "netarena-load 0.1.0 (tests build)"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("NETARENA_LOAD", str(fake))
    check = doctor._check_generator_build()
    assert check.status == "warn" and "the tests build" in check.meaning and check.fix == "make setup", check
