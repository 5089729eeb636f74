"""Profiles across runs and of the load generator, real: two `netarena run --profile` of the fixture server into
one SQLite store, B's server spending extra CPU in a function of its own (fixture_server.py --spin); `netarena
compare` draws B's flame graph coloured by the change from A and lists the frames whose self share moved most;
the generator (netarena-load) is sampled by perf in the same repeat, stored as the profile's `generator`, and
drawn only where the repeat was generator-bound (GEN)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import FIXTURE_CONTESTANTS, db_rows, run_cli, write_suite
from netarena.profile import PROFILED
from netarena.profile.folded import parse
from test_report_html import _browser, _open_offline, chart_traces, tables

SUITE = """name = "profiled-compare"
contestants = ["fx-good"]
repeat = 1
warmup_s = 0.5
duration_s = 3.0
timeout_s = 5

[[measure]]
scenario = "hello"
connections = [8]

# For the generator's profile: open loop, busy-polling 3 ms before each send (2 ms apart), so netarena-load is
# on its CPU nearly all the window, most of it in its own scheduling loop, however slow the server.
[[measure]]
scenario = "hello"
connections = [8]
rate = [500]
generator_spin_us = 3000
"""
CLOSED, OPEN = "c=8,w=1", "c=8,w=1,rate=500,spin=3000us"
# B's server counts to this before every response: most of its CPU then goes to spin(), a frame A never has.
SPIN = 20000


def _contestants(tmp_path: Path, name: str, spin: int | None) -> Path:
    """fx-good in a contestants folder of its own, its start command with --spin SPIN when given."""
    folder = tmp_path / name
    shutil.copytree(FIXTURE_CONTESTANTS / "_fixture-shared", folder / "_fixture-shared")
    shutil.copytree(FIXTURE_CONTESTANTS / "fx-good", folder / "fx-good")
    if spin is not None:
        manifest = folder / "fx-good" / "contestant.toml"
        text = manifest.read_text()
        start = 'command = ["python3", "{dir}/../_fixture-shared/fixture_server.py", "--port", "{port}"]'
        assert start in text
        manifest.write_text(text.replace(start, start[:-1] + f', "--spin", "{spin}"]'))
    return folder


def _profile(results: Path, run_id: int, level_key: str = CLOSED) -> tuple[int, dict]:
    [row] = db_rows(results, "SELECT id, profile_json FROM measurements WHERE run_id=? AND discarded=? AND "
                             "level_key=?", (run_id, PROFILED, level_key))
    return row["id"], json.loads(row["profile_json"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory, generator_binary):
    """Run 1 (A): the plain fixture server; run 2 (B): the same with --spin, and perf missing, so B's generator
    is not profiled (its server, by py-spy, still is). One store."""
    tmp = tmp_path_factory.mktemp("compare")
    cache = tmp / "cache"
    cache.mkdir()
    suite = write_suite(tmp / "suite.toml", SUITE)
    results = tmp / "results"
    for folder, env in ((_contestants(tmp, "a", None), {}),
                        (_contestants(tmp, "b", SPIN), {"NETARENA_PERF": str(tmp / "no-perf-here")})):
        done = run_cli(["run", suite, "--profile", "--results", results, "--contestants-dir", folder], cache,
                       timeout_s=300, **env)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return tmp, cache, results


def test_the_generator_is_profiled_in_the_profiled_repeat_by_perf(runs):
    tmp, _, results = runs
    _, a = _profile(results, 1, OPEN)
    assert a["tool"] == "py-spy" and a["error"] is None and a["samples"] > 0, a  # the server's, as before
    gen = a["generator"]
    assert gen["tool"] == "perf" and gen["event"] == "cpu-clock" and gen["samples"] > 0, gen
    assert gen["error"] is None, gen
    stacks = parse(gen["views"]["cpu"])
    assert sum(stacks.values()) == gen["samples"]
    frames = {f for stack in stacks for f in stack}
    # netarena-load's own functions by name, counted as its own code where they are the leaf (self time). Most of
    # its samples are in the kernel (sending, receiving): on a slow host a few dozen samples can hold no leaf of
    # its own, so the count is checked against the stacks, not for being above 0.
    own = ("netarena_load::", "<netarena_load::")
    assert any(f.startswith(own) for f in frames), sorted(frames)[:60]
    assert gen["categories"]["own"] == sum(n for stack, n in stacks.items() if stack[-1].startswith(own)), \
        gen["categories"]
    assert sum(gen["categories"].values()) == gen["samples"], gen["categories"]
    # B ran with perf missing: its generator part says why, its server profile is whole.
    _, b = _profile(results, 2, OPEN)
    assert b["generator"]["error"] == f"NETARENA_PERF={tmp / 'no-perf-here'} is not an executable file", b
    assert b["generator"]["samples"] == 0 and b["error"] is None and b["samples"] > 0, b


def test_compare_draws_a_differential_flame_graph_and_lists_the_frames_that_moved(runs):
    tmp, cache, results = runs
    a_id, a = _profile(results, 1)
    b_id, b = _profile(results, 2)
    page = tmp / "compare.html"
    done = run_cli(["compare", "1", "2", "--results", results, "-o", page], cache, COLUMNS="200")
    assert done.returncode == 0, done.stderr
    # The terminal: per profiled pair, the frames whose self share moved most; spin() is new in B.
    out = done.stdout
    assert f"fx-good hello {CLOSED} (A #{a_id}, B #{b_id}):" in out, out
    section = out[out.index(f"fx-good hello {CLOSED} (A #{a_id}"):]
    spin_line = next(line.strip() for line in section.splitlines() if line.strip().startswith("spin ("))
    assert " 0.0% → " in spin_line and spin_line.endswith("points)") and "(+" in spin_line, spin_line
    text = page.read_text()
    [trace] = chart_traces(text, f"fx-good hello {CLOSED}: on CPU, B against A")
    assert trace["type"] == "icicle" and trace["branchvalues"] == "total"
    # The tree is B's: its root holds B's samples; each box is coloured by the change of its share, and the
    # hover gives A's and B's shares.
    assert trace["values"][0] == sum(parse(b["views"]["cpu"]).values())
    assert trace["marker"]["colorscale"][0][1] != trace["marker"]["colorscale"][-1][1]
    nodes = {label: i for i, label in enumerate(trace["labels"])}
    spin = [label for label in nodes if label.startswith("spin (")]
    assert spin, trace["labels"]
    i = nodes[spin[0]]
    assert trace["customdata"][i][0] == "0.00%"                        # A never ran spin()
    assert trace["marker"]["colors"][i] == pytest.approx(trace["values"][i] / trace["values"][0])  # grew by B's share
    assert trace["marker"]["colors"][i] > 0 and trace["marker"]["cmax"] == -trace["marker"]["cmin"]
    # Some frame A had shrank in B (spin took the share): blue somewhere.
    assert min(trace["marker"]["colors"]) < 0
    changes = tables(text, "profile-changes")[0]  # the pairs in compare's order: the closed-loop level first
    assert changes[0] == ["frame (self)", "A", "B", "change (points)"]
    assert any(row[0].startswith("spin (") and row[1] == "0.0%" for row in changes[1:]), changes
    document = json.loads(run_cli(["compare", "1", "2", "--results", results, "--json"], cache).stdout)
    pairs = {p["level_key"]: p for p in document["profiles"]}
    assert sorted(pairs) == [CLOSED, OPEN]
    pair = pairs[CLOSED]
    assert (pair["a_id"], pair["b_id"]) == (a_id, b_id)
    assert any(c["frame"].startswith("spin (") and c["a_share"] == 0 for c in pair["self_changes"])
    # One differential graph per level and view both profiles recorded.
    _renders_offline(page, sum(len([v for v, folded in pb["views"].items() if folded and pa["views"].get(v)])
                               for pa, pb in ((_profile(results, 1, k)[1], _profile(results, 2, k)[1])
                                              for k in (CLOSED, OPEN))))


def test_the_generators_profile_is_drawn_only_where_the_repeat_was_generator_bound(runs):
    """Starving the generator reliably also starves its profiler (cpu-clock samples the generator only while it
    runs), so the GEN flag is set on the stored measurement; the profile drawn is the real one."""
    tmp, cache, results = runs
    a_id, a = _profile(results, 1, OPEN)
    plain = tmp / "plain.html"
    assert run_cli(["report", "1", "--results", results, "-o", plain], cache).returncode == 0
    assert "the load generator on CPU" not in plain.read_text() and "generator-profile" not in plain.read_text()
    shown = run_cli(["show", "1", "--results", results], cache, COLUMNS="300").stdout
    assert "generator (netarena-load" not in shown
    db = sqlite3.connect(results / "netarena.sqlite")
    flags = json.loads(db.execute("SELECT flags_json FROM measurements WHERE id=?", (a_id,)).fetchone()[0])
    db.execute("UPDATE measurements SET flags_json=? WHERE id=?",
               (json.dumps([*flags, "generator_saturated"]), a_id))
    db.commit()
    db.close()
    page = tmp / "gen.html"
    assert run_cli(["report", "1", "--results", results, "-o", page], cache).returncode == 0
    text = page.read_text()
    [trace] = chart_traces(text, f"#{a_id} fx-good {OPEN}: the load generator on CPU")
    assert trace["type"] == "icicle" and trace["values"][0] == a["generator"]["samples"]
    assert any(label.startswith(("netarena_load::", "<netarena_load::")) for label in trace["labels"]), \
        trace["labels"]
    [top] = tables(text, f"generator-top-{a_id}")
    assert top[1][0] == a["generator"]["top_self"][0]["frame"]
    shown = run_cli(["show", "1", "--results", results], cache, COLUMNS="300").stdout
    # The terminal wraps a line at its width, and the frames' names (Rust's generic paths) are long: the line's
    # words are compared, wherever it was broken.
    words = " ".join(shown.split())
    top_frame = a["generator"]["top_self"][0]["frame"]
    assert (f"generator (netarena-load, GEN): {a['generator']['samples']:,} samples (perf, cpu-clock); top self: "
            f"{' '.join(top_frame.split())} ") in words, shown
    # The servers' graphs of both profiled levels, and the generator's of the one flagged GEN.
    _renders_offline(page, sum(len([v for v in _profile(results, 1, k)[1]["views"].values() if v])
                               for k in (CLOSED, OPEN)) + len([v for v in a["generator"]["views"].values() if v]))


def _renders_offline(path: Path, icicles: int) -> None:
    """The page in headless Chromium with the network off: it asks for nothing outside itself, draws every
    flame graph's nodes as boxes, and logs no error."""
    driver, profile = _browser()
    try:
        requested = _open_offline(driver, path.as_uri())
        assert [u for u in requested if not u.startswith(("file:", "data:", "blob:", "about:"))] == []
        drawn = driver.execute_script(
            "return Array.from(document.querySelectorAll('.plotly-graph-div'))"
            ".filter(g => (g._fullData || []).some(t => t.type === 'icicle'))"
            ".map(g => ({boxes: g.querySelectorAll('.iciclelayer path.surface').length,"
            " nodes: g.data[0].ids.length}))")
        assert len(drawn) == icicles, drawn
        for chart in drawn:
            assert chart["boxes"] == chart["nodes"], chart
        severe = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        assert severe == []
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
