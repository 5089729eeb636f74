"""`netarena run --profile`, real: py-spy on a CPython server, perf's cpu-clock on a Go one and on the JIT code
of a JVM and a Node server (named by their perf maps); a missing, a failing and a hanging profiler each cost the
profile only (netarena.profile)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from conftest import FIXTURE_CONTESTANTS, db_rows, default_cache_env, run_cli, write_suite
from netarena.profile import PROFILED
from netarena.profile.folded import JIT_DSO, frame_category, parse
from netarena.profile.sampler import GRACE_S, PERF_READY_S

# One repeat and a profiled one after it, each 1 s of warm-up and 3 s measured: a JVM started afresh for the
# profiled repeat has its Netty event loop compiled by then, and the window holds enough samples for each profile's
# parts even on a slow host (with 0.5 and 2 s under a 35% CPU quota a java-netty profile held 1 sample).
SUITE = """name = "profiled"
contestants = {contestants}
repeat = 1
warmup_s = 1.0
duration_s = 3.0
timeout_s = 5

[[measure]]
scenario = "hello"
connections = [16]
"""


def rows(results: Path) -> list[dict]:
    return [dict(r) for r in db_rows(results, "SELECT * FROM measurements ORDER BY id")]


def test_profiles_of_real_servers_name_their_hot_functions_and_stay_out_of_the_figures(tmp_path, generator_binary):
    """python-asyncio by py-spy, go-net, java-netty and node-http by perf (cpu-clock), the JIT frames of the last
    two named by their perf maps; the default cache and server user, as `netarena verify` installs them
    (test_contestants_verify)."""
    path = write_suite(tmp_path / "suite.toml", SUITE.format(contestants=json.dumps(
        ["python-asyncio", "go-net", "java-netty", "node-http"])))
    results = tmp_path / "results"
    env = default_cache_env()
    proc = subprocess.run([sys.executable, "-m", "netarena", "run", str(path), "--profile", "--results", str(results),
                           "--json"], capture_output=True, text=True, timeout=1800, env=dict(env, COLUMNS="200"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = rows(results)
    profiled = {r["contestant"]: r for r in found if r["discarded"] == PROFILED}
    assert sorted(profiled) == ["go-net", "java-netty", "node-http", "python-asyncio"], \
        [(r["contestant"], r["discarded"]) for r in found]
    for name, row in profiled.items():
        # One more repeat than the suite's, after them, and measured like them.
        assert row["repeat_index"] == 1 and row["status"] == "ok", (name, row["error"])
    asyncio = json.loads(profiled["python-asyncio"]["profile_json"])
    assert asyncio["tool"] == "py-spy" and asyncio["tool_version"].startswith("py-spy 0.4"), asyncio
    assert asyncio["error"] is None and asyncio["samples"] > 0, asyncio
    stacks = parse(asyncio["views"]["cpu"])
    assert sum(stacks.values()) == asyncio["samples"]
    frames = {f for stack in stacks for f in stack}
    # The server's own protocol handler and asyncio's transport that calls it, each in its part. (The categories
    # count leaf frames: the few samples of a slow host's window can all end in one part, so the parts are
    # asserted of the frames found, not of the counts.)
    handler = [f for f in frames if f.startswith("HttpProtocol.data_received ([own] python-asyncio/server.py:")]
    transport = [f for f in frames if "_read_ready" in f and "[stdlib] asyncio/selector_events.py" in f]
    assert handler and transport, frames
    assert {frame_category(f, "py-spy", [], ()) for f in handler} == {"own"}
    assert {frame_category(f, "py-spy", [], ()) for f in transport} == {"runtime"}
    assert sum(asyncio["categories"].values()) == asyncio["samples"]
    assert asyncio["top_self"] and sum(t["samples"] for t in asyncio["top_self"]) <= asyncio["samples"]
    go = json.loads(profiled["go-net"]["profile_json"])
    assert go["tool"] == "perf" and go["event"] == "cpu-clock" and go["error"] is None and go["samples"] > 0, go
    go_frames = {f for stack in parse(go["views"]["cpu"]) for f in stack}
    assert any(f.startswith("net/http.(*conn).serve (") for f in go_frames), sorted(go_frames)[:50]
    # The JVM: its JIT-compiled methods named by the map jcmd wrote after sampling; Netty's event loop (4.2:
    # NioIoHandler, run by SingleThreadIoEventLoop; 4.1: NioEventLoop) or its decoder's channelRead is hot.
    java = json.loads(profiled["java-netty"]["profile_json"])
    assert java["tool"] == "perf" and java["error"] is None and java["samples"] > 0, java
    assert len(java["perf_maps"]) == 1 and "(JVM, jcmd Compiler.perfmap)" in java["perf_maps"][0], java
    java_frames = {f for stack in parse(java["views"]["cpu"]) for f in stack}
    netty_hot = ("io.netty.channel.nio.NioIoHandler.", "io.netty.channel.nio.NioEventLoop.",
                 "io.netty.channel.SingleThreadIoEventLoop.", "io.netty.handler.codec.ByteToMessageDecoder.channelRead(")
    netty_frames = [f for f in java_frames if f.endswith(f" ({JIT_DSO})") and any(h in f for h in netty_hot)]
    assert netty_frames, sorted(java_frames)[:80]
    # Netty is the framework (java-netty's own symbols, netarena.netty.*, cannot match io.netty.*). In a 35% CPU
    # quota a profile held 5 samples, none with a Netty leaf: the part is asserted of the frames, not the counts.
    assert {frame_category(f, "perf", [], ()) for f in netty_frames} == {"framework"}, netty_frames
    # Only the profiled repeat's server got the JIT's flags (each repeat starts its own): the JVM says so.
    picked_up = {r["repeat_index"]: "Picked up JAVA_TOOL_OPTIONS: -XX:+PreserveFramePointer" in
                 Path(r["log_path"]).read_text(errors="replace") for r in found if r["contestant"] == "java-netty"}
    assert picked_up == {0: False, 1: True}, picked_up
    # Node: V8 wrote its map as it compiled (--perf-basic-prof): node:_http_server's request callback.
    node = json.loads(profiled["node-http"]["profile_json"])
    assert node["tool"] == "perf" and node["error"] is None and node["samples"] > 0, node
    node_frames = {f for stack in parse(node["views"]["cpu"]) for f in stack}
    http_server = [f for f in node_frames if f.startswith("JS:") and " node:_http_server:" in f
                   and f.endswith(f" ({JIT_DSO})")]
    assert http_server, sorted(node_frames)[:80]
    # Node's own library is the runtime's.
    assert {frame_category(f, "perf", [], ()) for f in http_server} == {"runtime"}, http_server
    # Every sample in one part by its leaf frame, and the kernel's time (sending, receiving, waiting in epoll)
    # among the servers' samples. Each profile holds a few dozen samples (99 Hz over 3 s of a server's CPU share),
    # fewer on a slow host: one server's kernel part can be 0 by chance, the three perf profiles' together not.
    perf_profiles = [go, java, node]
    assert all(sum(p["categories"].values()) == p["samples"] for p in perf_profiles), perf_profiles
    assert sum(p["categories"]["kernel"] for p in perf_profiles) > 0, [p["categories"] for p in perf_profiles]
    # The maps went with their servers: nothing of the profiles is left in /tmp.
    assert node["pids"] and not [p for p in java["pids"] + node["pids"] if Path(f"/tmp/perf-{p}.map").exists()]
    # The generator (netarena-load, by perf) is profiled in every profiled repeat, whatever the server's profiler.
    for name, row in profiled.items():
        generator = json.loads(row["profile_json"])["generator"]
        assert generator["tool"] == "perf" and generator["error"] is None and generator["samples"] > 0, \
            (name, generator)
    # Each window is the measured phase: the generator waited at its start barrier (--prepare) until the profilers
    # were ready (perf's events open on every thread), and the start time it was then given times the window;
    # perf's samples outside it are dropped. (A perf started at the window's start instead was still setting up
    # 1.9 s into a 2 s phase in a 35% CPU quota, and sampled 0.1 s.) Both ends are timed from the start time the
    # generator was given, not from when it woke up; 0.05 s leaves room for the clock readings a busy host delays.
    for name, row in profiled.items():
        assert "--prepare" in json.loads(row["generator_argv_json"]), name
        generator_document = json.loads(row["generator_json"])
        measured_from = datetime.fromisoformat(generator_document["started_at"]).timestamp()
        measured_to = datetime.fromisoformat(generator_document["ended_at"]).timestamp()
        for document in (json.loads(row["profile_json"]), json.loads(row["profile_json"])["generator"]):
            start, length = document["window_start_unix"], document["window_s"]
            assert start < measured_to and measured_from < start + length, (name, start, measured_from, length)
            if document["tool"] == "perf":
                assert abs(start - measured_from) < 0.05 and abs(start + length - measured_to) < 0.05, \
                    (name, start, length, measured_from, measured_to)
    # No profile in any figure: every group's figures come from its unprofiled repeat.
    shown = subprocess.run([sys.executable, "-m", "netarena", "show", "--json", "--results", str(results)],
                           capture_output=True, text=True, timeout=120, env=env)
    for group in json.loads(shown.stdout)["groups"]:
        assert group["repeats_ok"] == 1 and profiled[group["contestant"]]["id"] not in group["ok_ids"], group


def _contestant_profiled_by(tmp_path: Path, tool: str) -> Path:
    """The fixture fx-good in a contestants folder of its own, profiled by `tool`."""
    folder = tmp_path / "contestants"
    shutil.copytree(FIXTURE_CONTESTANTS / "_fixture-shared", folder / "_fixture-shared")
    shutil.copytree(FIXTURE_CONTESTANTS / "fx-good", folder / "fx-good")
    manifest = folder / "fx-good" / "contestant.toml"
    manifest.write_text(manifest.read_text() + f'\n[profile]\ntool = "{tool}"\n')
    return folder


def _fake_tool(tmp_path: Path, script: str) -> str:
    """A stand-in profiler: a shell script."""
    fake = tmp_path / "fake-perf"
    fake.write_text("#!/bin/sh\n" + script)
    fake.chmod(0o755)
    return str(fake)


# A stand-in perf that answers every command on its control FIFO and never stops: it is ready, takes its window, and
# hangs past it.
ANSWERS_AND_HANGS = """[ "$1" = --version ] && { echo "perf version fake"; exit 0; }
for arg; do [ "$previous" = --control ] && spec="${arg#fifo:}"; previous="$arg"; done
exec 3<"${spec%,*}" 4>"${spec#*,}"
while read -r command <&3; do echo "$command" >> "$0.commands.$$"; echo ack >&4; done
"""


@pytest.mark.parametrize("case", ["missing", "dies", "never-ready", "hangs"])
def test_a_missing_failing_or_hanging_profiler_costs_the_profile_never_the_measurement(tmp_path, cache_dir,
                                                                                        generator_binary, case):
    folder = _contestant_profiled_by(tmp_path, "perf")
    # The never-ready profiler's sleep, told apart from any other test's (tests of other checkouts may run at once).
    hanging = f"1000.{os.getpid()}"
    if case == "missing":
        perf = str(tmp_path / "no-perf-here")
    elif case == "dies":
        perf = _fake_tool(tmp_path, 'echo "perf: cannot attach" >&2; exit 3\n')
    elif case == "never-ready":
        perf = _fake_tool(tmp_path, '[ "$1" = --version ] && { echo "perf version fake"; exit 0; }\n'
                                    f'exec sleep {hanging}\n')
    else:
        perf = _fake_tool(tmp_path, ANSWERS_AND_HANGS)
    path = write_suite(tmp_path / "suite.toml", SUITE.format(contestants='["fx-good"]'))
    results = tmp_path / "results"
    result = run_cli(["run", path, "--profile", "--results", results, "--contestants-dir", folder], cache_dir,
                     timeout_s=300, NETARENA_PERF=perf)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    found = rows(results)
    assert [r["status"] for r in found] == ["ok"] * 2, [(r["status"], r["error"]) for r in found]
    (profiled,) = [r for r in found if r["discarded"] == PROFILED]
    document = json.loads(profiled["profile_json"])
    assert document["tool"] == "perf" and document["samples"] == 0, document
    if case == "missing":
        assert document["error"] == f"NETARENA_PERF={perf} is not an executable file", document
    elif case == "dies":
        assert document["error"].startswith("perf exited with code 3 before it was ready to sample"), document
        assert "cannot attach" in document["error"]
    elif case == "never-ready":  # the load waits for it a bounded time, then goes on unprofiled
        assert document["error"].startswith(f"perf was not ready to sample within {PERF_READY_S:g} s"), document
    else:
        assert document["error"] == f"perf was stopped: still running {GRACE_S:g} s after its window", document
        # Both perfs (the server's, the generator's) were asked if ready before the load began, and told to stop
        # once it had ended.
        each = [log.read_text().splitlines() for log in tmp_path.glob("fake-perf.commands.*")]
        assert each == [["ping", "stop"]] * 2, each
    # The generator's profile (perf too) fails the same way, on its own, and says so.
    generator = document["generator"]
    assert generator["tool"] == "perf" and generator["samples"] == 0, generator
    assert generator["error"].split(":")[0] == document["error"].split(":")[0], generator
    # The profiled repeat's load was measured all the same.
    assert json.loads(profiled["generator_json"])["totals"]["requests"] > 0
    # No profiler is left behind.
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert perf not in ps and f"sleep {hanging}" not in ps


def test_profile_is_refused_with_cluster_and_url(tmp_path, cache_dir):
    path = write_suite(tmp_path / "suite.toml", SUITE.format(contestants='["fx-good"]'))
    cluster = tmp_path / "cluster.toml"
    cluster.write_text("")
    result = run_cli(["run", path, "--profile", "--cluster", cluster, "--results", tmp_path / "r"], cache_dir)
    assert result.returncode == 2 and "--profile: profiles are taken on this machine only" in result.stderr
    assert not (tmp_path / "r").exists(), result.stderr
    result = run_cli(["run", "--profile", "--url", "http://127.0.0.1:9/", "--results", tmp_path / "r"], cache_dir)
    assert result.returncode == 2 and "--profile" in result.stderr and not (tmp_path / "r").exists(), result.stderr


def test_folded_stacks_from_perf_script_and_py_spy_name_each_frames_part(tmp_path):
    """perf script right-aligns a record's PID/TID (a short PID starts with spaces: those samples were lost
    once); a context switch's call chain gets the time until its thread's next switch in, preempted ones under
    their own root; JIT frames (perf maps) get their part by file, package or module; py-spy frames are marked
    own / package / standard library by their file."""
    from netarena.profile.folded import (PREEMPTED, off_cpu, perf_script_views, py_spy_stacks, summarize,
                                         to_text)

    script = ("   812/815  100.000000:          cpu-clock/freq=99/: \n"
              "\tffffffff81e327be tcp_sendmsg ([kernel.kallsyms])\n"
              "\t           9f73b syscall.write (/srv/server)\n"
              "\t          291175 net/http.(*conn).serve (/srv/server)\n"
              "\t          1234ab main.hello (/srv/server)\n"
              "\n"
              "123456/123456  100.100000:          cpu-clock/freq=99/: \n"
              "\t           8d161 runtime.goexit.abi0 (/srv/server)\n"
              "\n"
              "   99/99  100.200000:          cpu-clock/freq=99/: \n"
              "\t               0 [unknown] (/usr/lib/libfoo.so)\n"
              "\n"
              "   812/815  101.000000: context-switches/period=1/: \n"
              "\tffffffff821f8c03 schedule ([kernel.kallsyms])\n"
              "\tffffffff821ffb7e do_nanosleep ([kernel.kallsyms])\n"
              "\t           cf545 clock_nanosleep@GLIBC_2.2.5 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
              "\n"
              "   812/815  101.000010: PERF_RECORD_SWITCH OUT\n"
              "   812/816  101.100000: context-switches/period=1/: \n"
              "\tffffffff821f8c03 schedule ([kernel.kallsyms])\n"
              "\t          1234ab main.hello (/srv/server)\n"
              "\n"
              "   812/816  101.100010: PERF_RECORD_SWITCH OUT preempt\n"
              "   812/816  101.200000: PERF_RECORD_SWITCH IN\n"
              "   812/815  102.000000: PERF_RECORD_SWITCH IN\n"
              "   812/815  102.000100: PERF_RECORD_SWITCH OUT\n")
    views = perf_script_views(script, pids={812, 123456}, rate_hz=100)
    assert views.cpu == {("main.hello (server)", "net/http.(*conn).serve (server)", "syscall.write (server)",
                          "tcp_sendmsg_[k]"): 1, ("runtime.goexit.abi0 (server)",): 1}
    # 1 s asleep and 0.1 s preempted, in counts of 1/100 s; the switch out at the end, never back, is not counted.
    assert views.idle == {("clock_nanosleep@GLIBC_2.2.5 (libc.so.6)", "do_nanosleep_[k]", "schedule_[k]"): 100,
                          (PREEMPTED, "main.hello (server)", "schedule_[k]"): 10}
    assert summarize(views.cpu, "perf", [], ("main.",))["categories"] == {
        "own": 0, "framework": 0, "runtime": 1, "kernel": 1, "unknown": 0}
    # A window (perf samples from before the load to after it): the on-CPU samples inside it, and the part of each
    # time away inside it (0.15 s of the sleep, 0.05 s of the preemption).
    windowed = perf_script_views(script, pids={812, 123456}, rate_hz=100, window=(100.05, 101.15))
    assert windowed.cpu == {("runtime.goexit.abi0 (server)",): 1}
    assert windowed.idle == {("clock_nanosleep@GLIBC_2.2.5 (libc.so.6)", "do_nanosleep_[k]", "schedule_[k]"): 15,
                             (PREEMPTED, "main.hello (server)", "schedule_[k]"): 5}
    # py-spy's off-CPU view: every thread's samples less the GIL holder's, stack by stack, never below zero.
    assert off_cpu(Counter({("a", "recv"): 7, ("a", "run"): 3, ("b",): 1}), Counter({("a", "run"): 4, ("c",): 2})) \
        == {("a", "recv"): 7, ("b",): 1}
    # JIT frames, named by a process's perf map, get one name across processes and their part by their own
    # names: V8's by file, the JVM's by package, the BEAM's by module.
    node_own = tmp_path / "contestants" / "node-x"
    script = ("  700/700  100.000000:          cpu-clock/freq=99/: \n"
              f"\t    7f00000010 JS:*handle {node_own}/server.js:78:16 (/tmp/perf-700.map)\n"
              "\t    7f00000020 JS:*parserOnIncoming node:_http_server:1026:26 (/tmp/perf-700.map)\n"
              "\t    7f00000030 [unknown] (/tmp/perf-700.map)\n"
              "\n"
              "  701/702  100.100000:          cpu-clock/freq=99/: \n"
              "\t    7f00000020 JS:*parserOnIncoming node:_http_server:1026:26 (/tmp/perf-701.map)\n"
              "\n"
              "  701/702  100.200000:          cpu-clock/freq=99/: \n"
              "\t    7f00000040 JS:~parse /srv/x/node_modules/fast-json/index.js:3:1 (/tmp/perf-701.map)\n"
              "\t    5500000001 Builtins_CallFunction (/usr/bin/node)\n")
    stacks = perf_script_views(script).cpu
    assert stacks == {("[JIT]", "JS:*parserOnIncoming node:_http_server:1026:26 (JIT)",
                       f"JS:*handle {node_own}/server.js:78:16 (JIT)"): 1,
                      ("JS:*parserOnIncoming node:_http_server:1026:26 (JIT)",): 1,
                      ("Builtins_CallFunction (node)", "JS:~parse /srv/x/node_modules/fast-json/index.js:3:1 (JIT)"): 1}
    assert summarize(stacks, "perf", [node_own])["categories"] == {
        "own": 1, "framework": 1, "runtime": 1, "kernel": 0, "unknown": 0}
    assert [frame_category(f, "perf", [], ("netarena.netty.", "$netarena_http:")) for f in (
        "void netarena.netty.HttpHandler.channelRead0(io.netty.channel.ChannelHandlerContext) (JIT)",
        "int io.netty.channel.nio.NioIoHandler.run(io.netty.channel.IoHandlerContext) (JIT)",
        "int sun.nio.ch.IOUtil.read(java.io.FileDescriptor, java.nio.ByteBuffer) (JIT)",
        "java.lang.String java.lang.String.valueOf(int) (JIT)",
        "Interpreter (JIT)", "PhaseChaitin::Split (libjvm.so)",
        "void io.netty.util.concurrent.AbstractEventExecutor$$Lambda$61/0x0000000800c2e0b0.run() (JIT)",
        "$netarena_http:loop/2 (JIT)", "$gen_tcp:send/2 (JIT)", "$global::arith_compare_shared (JIT)",
        "[JIT]", "[deno]", "[libfoo.so]")] == ["own", "framework", "runtime", "runtime", "runtime", "runtime",
                                               "framework", "own", "runtime", "runtime", "unknown", "runtime",
                                               "unknown"]
    own = tmp_path / "contestants" / "python-x"
    own.mkdir(parents=True)
    raw = (f'process 1:"python server.py";main ({own}/server.py:3);'
           "headers_received (/venv/lib/python3.11/site-packages/tornado/routing.py:249);"
           "write (/usr/lib/python3.11/asyncio/selector_events.py:1057) 5\n"
           f'process 1:"python server.py";main ({own}/server.py:3) 2\n')
    stacks = py_spy_stacks(raw, [own])
    assert to_text(stacks) == ("main ([own] python-x/server.py:3);headers_received ([pkg] tornado/routing.py:249);"
                               "write ([stdlib] asyncio/selector_events.py:1057) 5\n"
                               "main ([own] python-x/server.py:3) 2\n")
    summary = summarize(stacks, "py-spy", [own])
    assert summary["categories"] == {"own": 2, "framework": 0, "runtime": 5, "kernel": 0, "unknown": 0}
    assert summary["top_self"][0] == {"frame": "write ([stdlib] asyncio/selector_events.py:1057)", "samples": 5,
                                      "share": round(5 / 7, 4)}


SLEEP_SUITE = """name = "sleeping"
contestants = ["fx-good"]
repeat = 1
warmup_s = 0.5
duration_s = 2.0
timeout_s = 5

[[measure]]
scenario = "sleep"
connections = [4]
sleep_ms = [20]
"""


@pytest.mark.parametrize("tool", ["py-spy", "perf"])
def test_a_sleeping_server_shows_its_sleep_off_cpu_and_not_on_cpu(tmp_path, cache_dir, generator_binary, tool):
    """The threaded fixture server's handlers sleep 20 ms a request (time.sleep in do_GET): its threads spend
    most of their time there, off their CPU. The sleep must be in the off-CPU view and not in the on-CPU one:
    for py-spy the handler's line that calls time.sleep (Python frames only), for perf the kernel's nanosleep."""
    folder = _contestant_profiled_by(tmp_path, tool)
    # Each request also spends about a millisecond on its CPU (--spin): perf's cpu-clock samples a thread once it has
    # run a sampling period (10 ms at 99 Hz), and a thread per connection that only sleeps and answers runs less
    # than that in a window on a slow host (a profile held no sample of the server running).
    manifest = folder / "fx-good" / "contestant.toml"
    manifest.write_text(manifest.read_text().replace('"--port", "{port}"]', '"--port", "{port}", "--spin", "20000"]',
                                                     1))
    path = write_suite(tmp_path / "suite.toml", SLEEP_SUITE)
    results = tmp_path / "results"
    result = run_cli(["run", path, "--profile", "--results", results, "--contestants-dir", folder], cache_dir,
                     timeout_s=300)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    (profiled,) = [r for r in rows(results) if r["discarded"] == PROFILED]
    document = json.loads(profiled["profile_json"])
    assert document["error"] is None, document
    cpu, idle = parse(document["views"]["cpu"]), parse(document["views"]["idle"])
    assert document["idle_samples"] == sum(idle.values()) > 0, document

    if tool == "py-spy":
        server = (FIXTURE_CONTESTANTS / "_fixture-shared" / "fixture_server.py").read_text().splitlines()
        line = next(n for n, text in enumerate(server, 1) if "time.sleep(ms / 1000)" in text)

        def sleeping(stack):
            return stack[-1].startswith("Handler.do_GET (") and stack[-1].endswith(f"fixture_server.py:{line})")
    else:
        def sleeping(stack):
            return any("nanosleep" in frame for frame in stack)
    asleep_off = sum(count for stack, count in idle.items() if sleeping(stack))
    asleep_on = sum(count for stack, count in cpu.items() if sleeping(stack))
    # Off CPU, the sleep is where the handler threads spend their time: more than any other place in the view (the
    # accept loop's wait, the connections' threads waiting for their next request).
    others = Counter()
    for stack, count in idle.items():
        if not sleeping(stack):
            others[stack[-1]] += count
    assert asleep_off > max(others.values(), default=0), document["views"]["idle"][:3000]
    # On CPU, a sleeping thread is not sampled: only the call's way in and out (entering the system call, taking
    # the GIL back), a small fraction of a request's CPU, against the 20 ms each request sleeps. The bound is a
    # ratio of the two views, so a slower host (more CPU per request, fewer requests) keeps it.
    assert asleep_on * 20 < asleep_off, (asleep_on, asleep_off, document["views"]["cpu"][:3000])
