"""The orchestrator's edges, each against a real process: hostile servers, damaged stores, a stranger's
process group, manifests that reach outside their folder or into apt-get's options."""

from __future__ import annotations

import errno
import json
import os
import pwd
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import psutil

from conftest import FIXTURE_CONTESTANTS, cli_env, db_rows, run_cli, write_suite
from netarena.process import RUN_TOKEN_VAR, ManagedProcess, carries_token, kill_group
from netarena.server_user import RUN_AS_ROOT_ENV, SERVER_USER

HELLO = """name = "edges"
contestants = {contestants}
repeat = 1
warmup_s = 0.2
duration_s = 0.5
timeout_s = 1

[[measure]]
scenario = "hello"
connections = [2]
"""


def hello_suite(tmp_path, contestants):
    return write_suite(tmp_path / "suite.toml", HELLO.format(contestants=json.dumps(contestants)))


def common(results):
    return ["--results", results, "--contestants-dir", FIXTURE_CONTESTANTS]


def measurement(results, contestant):
    [row] = db_rows(results, "SELECT * FROM measurements WHERE contestant=?", (contestant,))
    return row


def seconds(row) -> float:
    return (datetime.fromisoformat(row["ended_at"]) - datetime.fromisoformat(row["started_at"])).total_seconds()


def one_error_line(result) -> str:
    """The whole of stderr: one line starting with 'error:', no traceback."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


# ----------------------------------------------------------------------------- outside text is not markup


def test_a_header_that_looks_like_markup_is_printed_as_it_is(tmp_path, cache_dir, generator_binary,
                                                               no_leftover_processes):
    """`Content-Type: [/]` once raised rich's MarkupError in the failure line and left the run 'running'."""
    results = tmp_path / "results"
    result = run_cli(["run", hello_suite(tmp_path, ["fx-markup", "fx-good"]), *common(results)], cache_dir)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    wrong = measurement(results, "fx-markup")
    assert wrong["status"] == "failed" and wrong["failure_kind"] == "verify_failed"
    assert "Content-Type '[/]', expected text/plain" in wrong["error"]
    assert "Content-Type '[/]'" in result.stderr + result.stdout  # shown literally, brackets included
    assert measurement(results, "fx-good")["status"] == "ok"
    [run] = db_rows(results, "SELECT status FROM runs")
    assert run["status"] == "complete"
    assert (results / "report-run-1.html").is_file()
    shown = run_cli(["show", "--results", results], cache_dir)
    assert shown.returncode == 0 and "[/]" in shown.stdout, shown.stderr


# ----------------------------------------------------------------------------- bounded fetches


RSS_WRAPPER = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:]).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)  # KiB, largest descendant
sys.exit(code)
"""


def test_a_trickling_or_endless_body_fails_its_measurement_and_the_run_goes_on(tmp_path, cache_dir, generator_binary,
                                                                                no_leftover_processes):
    """A 200 head announcing 100000 bytes sent at one byte a second, and one announcing 10 GB sent as fast as it
    is read: each verification request has an overall deadline (the suite's timeout_s = 1 s) and reads at most
    the expected size plus one byte. Without them the first held the run for a day, the second filled memory."""
    results = tmp_path / "results"
    argv = [sys.executable, "-m", "netarena", "run", str(hello_suite(tmp_path, ["fx-trickle", "fx-huge", "fx-good"])),
            *map(str, common(results))]
    result = subprocess.run([sys.executable, "-c", RSS_WRAPPER, *argv], capture_output=True, text=True, timeout=120,
                            env=cli_env(cache_dir))
    assert result.returncode == 0, result.stderr
    trickle = measurement(results, "fx-trickle")
    assert trickle["status"] == "failed" and trickle["failure_kind"] == "verify_failed", trickle["error"]
    # What was received is in the failure: the head, then the few bytes that came within the deadline.
    assert re.search(r"status 200, then \d+ of 100000 body bytes within timeout_s=1 s", trickle["error"]), \
        trickle["error"]
    # Bounded by the deadline, not by the fixture's 100000 s of trickling (it would send for 600 s at most).
    assert seconds(trickle) < 60
    huge = measurement(results, "fx-huge")
    assert huge["status"] == "failed" and huge["failure_kind"] == "verify_failed"
    assert "(14 bytes)" in huge["error"], huge["error"]  # 13 expected + 1: the read stopped there
    assert measurement(results, "fx-good")["status"] == "ok"
    assert (results / "report-run-1.html").is_file()
    max_rss_kib = int(result.stderr.strip().splitlines()[-1])
    assert max_rss_kib < 1024 * 1024, max_rss_kib  # no process came near holding the announced 10 GB


# ----------------------------------------------------------------------------- damaged stores


MOCK_SUITE = HELLO.replace('contestants = {contestants}', 'contestants = ["fx-good"]')


def mock_run(tmp_path, cache_dir, results, *extra):
    suite = write_suite(tmp_path / "mock.toml", MOCK_SUITE)
    return run_cli(["run", suite, *common(results), *extra], cache_dir, NETARENA_BACKEND="mock")


def test_after_a_run_the_store_is_one_file(tmp_path, cache_dir):
    results = tmp_path / "results"
    assert mock_run(tmp_path, cache_dir, results).returncode == 0
    wal = results / "netarena.sqlite-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    alone = tmp_path / "copy"
    alone.mkdir()
    shutil.copy(results / "netarena.sqlite", alone / "netarena.sqlite")
    exported = run_cli(["export", "--json", "--results", alone], cache_dir)
    assert exported.returncode == 0, exported.stderr
    assert len(json.loads(exported.stdout)["measurements"]) == 1


def commands_on(results, tmp_path):
    suite = write_suite(tmp_path / "mock.toml", MOCK_SUITE)
    return {"show": ["show", "--results", results], "report": ["report", "--results", results],
            "export": ["export", "--json", "--results", results],
            "run": ["run", suite, *common(results)],
            "run --resume": ["run", "--resume", "1", *common(results)]}


def test_a_damaged_store_is_one_line_and_exit_2(tmp_path, cache_dir):
    results = tmp_path / "results"
    assert mock_run(tmp_path, cache_dir, results).returncode == 0
    db = results / "netarena.sqlite"
    db.write_bytes(db.read_bytes())  # checkpointed: the file alone is the store
    page_size = sqlite3.connect(db).execute("PRAGMA page_size").fetchone()[0]
    pages = db.stat().st_size // page_size
    assert pages >= 4
    with db.open("r+b") as f:  # a few KB of the third page overwritten, as a bad disk or a stray write would
        f.seek(2 * page_size)
        f.write(b"\x5a" * 3000)
    for name, args in commands_on(results, tmp_path).items():
        result = run_cli(args, cache_dir, NETARENA_BACKEND="mock")
        assert result.returncode == 2, (name, result.stdout, result.stderr)
        line = one_error_line(result)
        assert str(db) in line and "not a readable netarena store" in line and "move it aside" in line, (name, line)


def test_a_store_of_another_schema_version_is_one_line_and_exit_2(tmp_path, cache_dir):
    results = tmp_path / "results"
    assert mock_run(tmp_path, cache_dir, results).returncode == 0
    db = sqlite3.connect(results / "netarena.sqlite")
    db.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    db.execute("UPDATE runs SET status='interrupted'")
    db.commit()
    db.close()
    before = (results / "netarena.sqlite").read_bytes()
    for name, args in commands_on(results, tmp_path).items():
        result = run_cli(args, cache_dir, NETARENA_BACKEND="mock")
        assert result.returncode == 2, (name, result.stdout, result.stderr)
        line = one_error_line(result)
        assert "schema version 2" in line and "reads version 1" in line and str(results) in line, (name, line)
    assert (results / "netarena.sqlite").read_bytes() == before  # never touched


# ----------------------------------------------------------------------------- whom cleanup may kill


def test_a_store_naming_a_strangers_process_group_does_not_kill_it(tmp_path, cache_dir):
    """Rows of live_processes are a claim, not a proof: without the recorded start time and this netarena's
    token in the process's environment, nothing is signalled."""
    results = tmp_path / "results"
    assert mock_run(tmp_path, cache_dir, results).returncode == 0
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        started = psutil.Process(stranger.pid).create_time()
        db = sqlite3.connect(results / "netarena.sqlite")
        db.executemany("INSERT INTO live_processes(run_id, pgid, leader_start_time, role, token) VALUES (?,?,?,?,?)",
                       [(1, stranger.pid, None, "server:fx-good", None),  # NULL start time: never matches
                        (2, stranger.pid, started, "generator", "0" * 32)])  # right start time, no token of ours
        db.commit()
        db.close()
        result = mock_run(tmp_path, cache_dir, results)
        assert result.returncode == 0, result.stderr
        assert "killed" not in result.stderr
        time.sleep(0.2)
        assert stranger.poll() is None  # alive
        assert db_rows(results, "SELECT * FROM live_processes") == []  # the claims are dropped
    finally:
        stranger.send_signal(signal.SIGKILL)
        stranger.wait()


def test_resume_runs_the_contestants_folder_named_now_not_the_stores(tmp_path, cache_dir):
    results = tmp_path / "results"
    elsewhere = tmp_path / "contestants"
    for folder in ("fx-good", "_fixture-shared"):
        shutil.copytree(FIXTURE_CONTESTANTS / folder, elsewhere / folder)
    suite = write_suite(tmp_path / "mock.toml", MOCK_SUITE)
    assert run_cli(["run", suite, "--results", results, "--contestants-dir", elsewhere], cache_dir,
                   NETARENA_BACKEND="mock").returncode == 0
    db = sqlite3.connect(results / "netarena.sqlite")
    db.execute("UPDATE runs SET status='interrupted'")
    db.execute("DELETE FROM measurements")
    db.commit()
    db.close()
    # Without --contestants-dir the checkout's folder is used: fx-good is not there, and the message says which
    # folder the run used.
    result = run_cli(["run", "--resume", "--results", results], cache_dir, NETARENA_BACKEND="mock")
    assert result.returncode == 2
    line = one_error_line(result)
    assert "unknown contestant 'fx-good'" in line and f"the run used --contestants-dir {elsewhere}" in line
    # A manifest changed since the run started is refused too.
    manifest = elsewhere / "fx-good" / "contestant.toml"
    manifest.write_text(manifest.read_text().replace("stop_timeout_s = 2", "stop_timeout_s = 3"))
    result = run_cli(["run", "--resume", "--results", results, "--contestants-dir", elsewhere], cache_dir,
                     NETARENA_BACKEND="mock")
    assert result.returncode == 2
    assert "the manifest of fx-good" in one_error_line(result)


# ----------------------------------------------------------------------------- what a manifest may reach


def test_a_manifest_reaching_outside_its_folder_or_into_apt_options_is_refused(tmp_path, cache_dir):
    source = (FIXTURE_CONTESTANTS / "fx-good" / "contestant.toml").read_text()
    folder = tmp_path / "contestants"
    (folder / "fx-good").mkdir(parents=True)
    (tmp_path / "requirements.txt").write_text("flask==3.0.0\n")
    manifest = folder / "fx-good" / "contestant.toml"
    cases = {
        "install.python_requirements": ('python_requirements = "../../requirements.txt"',
                                        "outside the contestant's folder"),
        "install.debian[1]": ('debian = ["nginx", "-oAPT::Update::Pre-Invoke::=touch /tmp/pwned"]',
                              "is not a Debian package name"),
        "install.steps[0]": ('steps = [["cp", "{dir}/../../requirements.txt", "{build_dir}"]]',
                             "outside the contestants directory"),
        "start.command": ("command = [\"python3\", \"../../evil.py\"]", "outside the contestants directory"),
        "start.echo_command": ('echo_command = ["/usr/bin/python3", "{dir}/echo.py"]', "the absolute path"),
        "start.env.PYTHONPATH": ('PYTHONPATH = "{dir}/lib:{dir}/../../lib"', "outside the contestants directory"),
    }
    for field, (line, why) in cases.items():
        section = "[" + field.split(".")[0] + ("." + field.split(".")[1] if field.startswith("start.env") else "")
        section += "]\n"
        if field.startswith("start.") and not field.startswith("start.env"):
            key = line.split(" = ")[0]
            edited = re.sub(rf"(?m)^{key} = .*$", lambda _: line, source) if re.search(rf"(?m)^{key} = ", source) \
                else source.replace("[start]\n", f"[start]\n{line}\n")
        elif section in source:
            edited = source.replace(section, f"{section}{line}\n")
        else:
            edited = source + f"\n{section}{line}\n"
        manifest.write_text(edited)
        for command in (["list"], ["verify", "fx-good"]):
            result = run_cli([*command, "--contestants-dir", folder], cache_dir)
            assert result.returncode == 2, (command, result.stdout, result.stderr)
            error = one_error_line(result)
            assert f"{manifest}:" in error and f"{field}: " in error and why in error, error


# ----------------------------------------------------------------------------- whom servers run as


def reachable_cache(tmp_path):
    """A cache the unprivileged server user can enter (pytest's own tmp folders are mode 700)."""
    path = tempfile.mkdtemp(prefix="netarena-edges-", dir="/tmp")
    os.chmod(path, 0o755)
    return Path(path)


def test_as_root_servers_run_unprivileged_unless_told_otherwise(tmp_path):
    cache = reachable_cache(tmp_path)
    try:
        env = {k: v for k, v in cli_env(cache).items() if k != RUN_AS_ROOT_ENV}
        before = sorted(p.name for p in (FIXTURE_CONTESTANTS / "fx-good").iterdir())

        def verify(*extra):
            return subprocess.run([sys.executable, "-m", "netarena", "verify", "fx-good", "--scenario", "hello",
                                   "--contestants-dir", str(FIXTURE_CONTESTANTS), *extra], capture_output=True,
                                  text=True, timeout=120, env=env)

        result = verify()
        assert result.returncode == 0, result.stdout + result.stderr
        log = (cache / "verify-logs" / "fx-good.hello.h1.log").read_text()
        run_dir = cache / "run" / "fx-good"
        if os.geteuid() == 0:
            user = pwd.getpwnam(SERVER_USER)
            assert f"fixture: uid {user.pw_uid} HOME {run_dir}" in log, log
            assert run_dir.stat().st_uid == user.pw_uid
            assert verify("--run-as-root").returncode == 0
            assert f"fixture: uid 0 HOME {run_dir}" in (cache / "verify-logs" / "fx-good.hello.h1.log").read_text()
        else:
            assert f"fixture: uid {os.geteuid()} HOME {run_dir}" in log, log
        assert sorted(p.name for p in (FIXTURE_CONTESTANTS / "fx-good").iterdir()) == before  # nothing written there
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def test_as_root_a_cache_the_server_user_cannot_enter_is_refused(tmp_path, cache_dir):
    if os.geteuid() != 0:
        result = run_cli(["verify", "fx-good", "--contestants-dir", FIXTURE_CONTESTANTS], cache_dir)
        assert result.returncode == 0  # servers run as this user, who owns the cache
        return
    closed = tmp_path / "closed"
    (closed / "cache").mkdir(parents=True)
    closed.chmod(0o700)
    env = {RUN_AS_ROOT_ENV: ""}
    result = run_cli(["verify", "fx-good", "--contestants-dir", FIXTURE_CONTESTANTS], closed / "cache", **env)
    assert result.returncode == 2
    line = one_error_line(result)
    assert f"the cache {closed / 'cache'} is out of reach of the user '{SERVER_USER}'" in line, line
    # The first folder on the way that is closed: pytest's own tmp root, or `closed`.
    assert re.search(r": (/tmp/pytest-of-root|" + re.escape(str(closed)) + r") is mode 700 ", line), line
    assert "--run-as-root" in line
    assert not (closed / "cache" / "verify-logs").exists()  # nothing started


def test_a_server_cannot_write_more_than_the_size_limit(tmp_path):
    """RLIMIT_FSIZE with SIGXFSZ ignored: past the limit writes fail (EFBIG), the writer is not killed."""
    log = tmp_path / "server.log"
    flood = ("import sys\nwritten = 0\ntry:\n    while written < 1_000_000:\n        sys.stdout.buffer.write(b'x' * 10_000)"
             "\n        sys.stdout.buffer.flush()\n        written += 10_000\nexcept OSError as exc:\n"
             "    sys.exit(f'stopped after {written}: errno {exc.errno}')\n")
    proc = ManagedProcess([sys.executable, "-c", flood], log_path=log, max_file_bytes=100_000)
    assert proc.proc.wait(timeout=60) == 1  # the script's own exit on the failed write, not a signal
    proc.close()
    assert log.stat().st_size <= 100_000
    assert f"errno {errno.EFBIG}" in log.read_text()[-200:] or log.stat().st_size == 100_000


def test_a_server_started_while_netarena_ignores_sigint_still_stops_on_sigint():
    """A shell without job control starts netarena with SIGINT and SIGQUIT ignored, which exec keeps; the servers
    it starts get the stop signals' default action back, so a SIGINT stop ends them at once, not by SIGKILL."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc = ManagedProcess(["sleep", "60"])
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        deadline = time.monotonic() + 10
        while not Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(b"sleep\0") and time.monotonic() < deadline:
            time.sleep(0.02)  # until the child has exec'd sleep
        status = Path(f"/proc/{proc.pid}/status").read_text()
        ignored = int(re.search(r"^SigIgn:\s*([0-9a-f]+)$", status, re.M).group(1), 16)
        assert not ignored & (1 << (signal.SIGINT - 1)), status
        outcome = proc.stop("SIGINT", timeout_s=10).to_dict()
        assert not outcome["killed"], outcome
    finally:
        proc.kill()


def test_a_server_that_drops_the_token_from_its_environment_is_still_known_by_its_descriptor():
    """nginx and uwsgi overwrite the memory /proc/PID/environ shows when they set their process title; the
    inherited descriptor on the deleted token file still proves the process is netarena's."""
    proc = ManagedProcess(["env", "-u", RUN_TOKEN_VAR, "sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while not Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(b"sleep\0") and time.monotonic() < deadline:
            time.sleep(0.02)  # until env has exec'd sleep
        assert RUN_TOKEN_VAR.encode() not in Path(f"/proc/{proc.pid}/environ").read_bytes()
        assert not carries_token(proc.pid, "0" * 32)
        assert carries_token(proc.pid, proc.token)
        assert len(kill_group(proc.pgid, proc.start_time, proc.token)) == 1
        assert not psutil.pid_exists(proc.pid)  # killed and reaped (psutil waited for it)
    finally:
        proc.kill()
    assert not list(Path(tempfile.gettempdir()).glob(f"netarena-token-{proc.token}*"))  # nothing left on disk


# A server (sleep, the shell's own pid after exec) with a helper in a session of its own (setsid), as the Erlang VM
# has erl_child_setup: the helper writes its file once started, then runs AFTER.
HELPER_SERVER = ('server=$$; setsid sh -c "touch \\$0; AFTER" "$1" & '
                 'exec sleep 60')


def _server_with_helper(tmp_path: Path, after: str) -> ManagedProcess:
    started = tmp_path / "helper-started"
    proc = ManagedProcess(["sh", "-c", HELPER_SERVER.replace("AFTER", after), "server", str(started)])
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert started.exists(), "the helper did not start"
    return proc


def _any_running(processes: list[psutil.Process]) -> bool:
    """Whether any of them is there and not a zombie."""
    def running(proc):
        try:
            return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False
    return any(running(proc) for proc in processes)


def test_a_helper_in_its_own_session_that_ends_after_the_server_is_not_escaped(tmp_path):
    """The helper polls for the server and ends a second after it: stop waits for it instead of calling it
    escaped, and nothing is left."""
    proc = _server_with_helper(tmp_path, "while kill -0 $server 2>/dev/null; do sleep 0.05; done; sleep 1")
    helper = [p for p in psutil.Process(proc.pid).children(recursive=True) if p.name() == "sh"]
    assert helper, "no helper process"
    outcome = proc.stop("SIGTERM", timeout_s=10).to_dict()
    assert outcome["escaped"] == [] and outcome["leftover"] == [] and not outcome["killed"], outcome
    assert not _any_running(helper)


def test_a_helper_in_its_own_session_that_stays_is_escaped_and_killed(tmp_path):
    """A helper still there at the stop's deadline is escaped, and stop kills it."""
    proc = _server_with_helper(tmp_path, "sleep 60")
    helper = [p for p in psutil.Process(proc.pid).children(recursive=True) if p.pid != proc.pid]
    outcome = proc.stop("SIGTERM", timeout_s=1).to_dict()
    assert [e["name"] for e in outcome["escaped"]] and outcome["leftover"] == [], outcome
    deadline = time.monotonic() + 10
    while _any_running(helper) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _any_running(helper), "the helper was not killed"


# ----------------------------------------------------------------------------- a server slower than one attempt


def test_a_server_slower_than_one_readiness_attempt_is_waited_for(tmp_path):
    """A server that answers, but each new connection later than one readiness attempt's timeout (as a first TLS
    handshake loading its code on a starved host does), is ready within ready_timeout_s: an attempt after one that
    waited out its whole timeout waits twice as long. With a fixed timeout every attempt failed alike."""
    from netarena.backends.real import RealBackend
    from netarena.config import load_manifest
    from netarena.contestants import Contestant
    from netarena.ports import free_port
    from netarena.process import available_cpus

    root = FIXTURE_CONTESTANTS / "fx-slow-connections"
    contestant = Contestant(load_manifest(root / "contestant.toml"), root)
    delay_s = 1.0  # its manifest's --connection-delay-ms
    first_attempt_s = delay_s / 2  # the least an attempt is given (check_running's floor)
    backend = RealBackend(generator=None)
    port = free_port()
    proc = backend.start_server(contestant, "hello", port, 1, tmp_path, available_cpus()[:1], tmp_path / "server.log")
    try:
        kind, error, verification = backend.wait_ready(proc, contestant, "hello", port, tmp_path, first_attempt_s)
    finally:
        stop = backend.stop_server(contestant, proc)
    assert kind is None, f"{kind}: {error}"
    assert verification["ok"] is True, verification
    assert not stop["leftover"] and not stop["escaped"], stop
