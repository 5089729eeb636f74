"""Profiles in the reports: a run built by hand in a real store, with two profiled repeats (a py-spy one with an
idle view, a perf one with kernel frames), one contestant that could not be profiled and normal repeats; the
HTML page (its plot data, its tables, in headless Chromium), the terminal, and export --folded."""

from __future__ import annotations

import re
import shutil
import statistics

import pytest

from conftest import run_cli
from netarena.export import write_folded
from netarena.report import load_report, write_run_report
from netarena.report.markdown import render_markdown
from netarena.report import profiles
from netarena.report.model import summary_document
from netarena.report.terminal import render_text
from netarena.store import Store
from report_fixtures import ENVIRONMENT, MANIFEST, _record, generator_doc, monitor_doc
from test_report_html import ARTIFACTS, _browser, _open_offline, chart_traces, tables

# alpha, py-spy: four stacks; "tiny" has 2 of 672 samples (0.3%), under the 0.5% that gets its own box.
ALPHA_CPU = ("main (server.py:10);serve (server.py:40);handle (server.py:55) 370\n"
             "main (server.py:10);serve (server.py:40);parse (fw/http.py:12) 200\n"
             "main (server.py:10);serve (server.py:40);_run_once (asyncio/base_events.py:1900) 100\n"
             "main (server.py:10);serve (server.py:40);tiny (server.py:99) 2\n")
ALPHA_IDLE = ("main (server.py:10);serve (server.py:40);select (selectors.py:469) 900\n"
              "main (server.py:10);serve (server.py:40);recv (fw/http.py:80) 100\n")
# omega, perf: the kernel's frames under the write and the wait.
OMEGA_CPU = ("omega;main;handle_request;write 300\n"
             "omega;main;handle_request;write;entry_SYSCALL_64_[k];__x64_sys_write_[k];tcp_sendmsg_[k] 500\n"
             "omega;main;epoll_wait;entry_SYSCALL_64_[k] 200\n")

ALPHA_PROFILE = {
    "tool": "py-spy", "tool_version": "py-spy 0.4.3", "event": "wall-clock sampling", "rate_hz": 99,
    "window_s": 3.0, "pids": [123, 124], "samples": 1672, "views": {"cpu": ALPHA_CPU, "idle": ALPHA_IDLE},
    "categories": {"own": 372, "framework": 200, "runtime": 100, "kernel": 0, "unknown": 0},
    "top_self": [{"frame": "handle (server.py:55)", "samples": 370, "share": 370 / 672},
                 {"frame": "parse (fw/http.py:12)", "samples": 200, "share": 200 / 672},
                 {"frame": "_run_once (asyncio/base_events.py:1900)", "samples": 100, "share": 100 / 672},
                 {"frame": "tiny (server.py:99)", "samples": 2, "share": 2 / 672}],
    "error": None}
OMEGA_PROFILE = {
    "tool": "perf", "tool_version": "perf version 6.1", "event": "cpu-clock", "rate_hz": 999, "window_s": 2.0,
    "pids": [200], "samples": 1000, "views": {"cpu": OMEGA_CPU, "idle": None},
    "categories": {"own": 300, "framework": 0, "runtime": 0, "kernel": 700, "unknown": 0},
    "top_self": [{"frame": "tcp_sendmsg_[k]", "samples": 500, "share": 0.5},
                 {"frame": "write", "samples": 300, "share": 0.3},
                 {"frame": "entry_SYSCALL_64_[k]", "samples": 200, "share": 0.2}],
    "error": "perf lost 12 samples"}
UNSUPPORTED = "the JVM's frames need perf-map-agent, not installed here"

# Unprofiled throughput of each repeat, and the profiled repeat's: alpha 0.9x its median (20,000), omega 0.95x
# its median (11,000).
RPS = {"alpha": ([19800.0, 20000.0, 20200.0], 18000.0), "omega": ([10000.0, 11000.0, 12000.0], 10450.0),
       "gamma": ([5000.0, 5100.0, 5200.0], 4000.0)}
PROFILES = {"alpha": ALPHA_PROFILE, "omega": OMEGA_PROFILE, "gamma": {"unsupported": UNSUPPORTED}}


def populate(store: Store, profiled: bool = True) -> tuple[int, dict[str, int]]:
    run_id = store.create_run(suite_name="profiles", suite_path=None, suite={"name": "profiles", "repeat": 3},
                              args={"argv": ["netarena", "run", "--profile"]}, backend="real", server_cpus=[0],
                              generator_cpus=[1], environment=ENVIRONMENT, planned=12, netarena_version="0.1.0",
                              git_sha="abc123", orchestrator_start_time=None)
    ids = {}
    for name, (repeats, profiled_rps) in RPS.items():
        manifest = {k: (v.format(name=name) if isinstance(v, str) else v) for k, v in MANIFEST.items()}
        store.record_contestant(run_id, name, {"name": name, **manifest}, None, "ready")
        for repeat, rps in enumerate([*repeats, profiled_rps] if profiled else repeats):
            extra = {"discarded": "profiled", "profile": PROFILES[name]} if repeat == 3 else {}
            mid = _record(store, run_id, contestant=name, scenario="hello", connections=10, repeat=repeat,
                          generator=generator_doc(rps=rps, connections=10, latency_us={500: 990, 900: 10}),
                          monitor=monitor_doc(cpu_pct=90, rss_bytes=20 << 20), error_rate=0.0, **extra)
            if repeat == 3:
                ids[name] = mid
    store.set_run_status(run_id, "complete")
    return run_id, ids


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    store = Store(results)
    run_id, ids = populate(store)
    path = write_run_report(store, run_id, results / "report.html")
    store.close()
    return results, run_id, ids, path


def test_profiled_repeats_are_out_of_the_figures_and_not_discarded_noise(written):
    results, run_id, ids, _ = written
    report = load_report(results, run_id)
    for g in report.groups:
        assert g.requests_per_s_median == statistics.median(RPS[g.contestant][0])
        assert g.repeats_ok == 3 and g.discarded == 0 and g.discarded_reasons == []
        assert g.profiled_ids == [ids[g.contestant]] and "PROF" not in g.badges
    document = summary_document(report)
    assert document["discarded"] == {"count": 0, "reasons": []}
    assert document["profiled"] == {"count": 3, "measurement_ids": sorted(ids.values())}
    # The exports' summary (export --json, stats.summarize) says the same: profiled apart, nothing discarded.
    from netarena.export import run_summary

    store = Store(results)
    try:
        exported = run_summary(store, run_id)
    finally:
        store.close()
    assert exported["measurements"]["discarded"] == 0 and exported["measurements"]["discarded_reasons"] == []
    assert sorted(exported["measurements"]["profiled"]) == sorted(ids.values())
    for group in exported["groups"]:
        assert group["discarded"] == 0 and group["profiled_ids"] == [ids[group["contestant"]]], group


def test_page_has_a_profiles_section_with_a_flame_graph_per_view(written):
    _, _, ids, path = written
    text = path.read_text()
    assert 'id="profiles"' in text and 'href="#profiles"' in text and "docs/profiles.md" in text
    views = {(ids["alpha"], "on CPU"): ALPHA_CPU, (ids["alpha"], "where the server waited (off-CPU)"): ALPHA_IDLE,
             (ids["omega"], "on CPU"): OMEGA_CPU}
    for (mid, what), folded in views.items():
        name = "alpha" if mid == ids["alpha"] else "omega"
        [trace] = chart_traces(text, f"#{mid} {name} c=10,w=1: {what}")
        assert trace["type"] == "icicle" and trace["branchvalues"] == "total"
        assert trace["tiling"] == {"orientation": "v", "flip": "y"}  # root at the bottom, like a flame graph
        total = sum(int(line.rsplit(" ", 1)[1]) for line in folded.splitlines())
        assert (trace["labels"][0], trace["parents"][0], trace["values"][0]) == ("all", "", total)
        assert trace["customdata"][0] == "100.00%" and "samples" in trace["hovertemplate"]
        # Every node's value is at least its children's: a box is as wide as the stacks through it.
        for node, value in zip(trace["ids"], trace["values"]):
            assert value >= sum(v for p, v in zip(trace["parents"], trace["values"]) if p == node)
    assert f"#{ids['omega']} omega c=10,w=1: where the server waited" not in text  # perf recorded no idle view
    # alpha's "tiny" (2 of 672 samples) is merged, and the page says so.
    [alpha_cpu] = chart_traces(text, f"#{ids['alpha']} alpha c=10,w=1: on CPU")
    assert "tiny (server.py:99)" not in alpha_cpu["labels"]
    other = alpha_cpu["labels"].index("(other)")
    assert alpha_cpu["values"][other] == 2
    assert alpha_cpu["labels"][alpha_cpu["ids"].index(alpha_cpu["parents"][other])] == "serve (server.py:40)"
    assert "1 frame node(s) under 0.5% of the samples each (2 samples in all) are merged" in text
    [omega_cpu] = chart_traces(text, f"#{ids['omega']} omega c=10,w=1: on CPU")
    assert "tcp_sendmsg_[k]" in omega_cpu["labels"] and "(other)" not in omega_cpu["labels"]
    assert "every frame drawn" in text


def test_page_has_the_meta_top_self_split_and_overhead(written):
    _, _, ids, path = written
    text = path.read_text()
    alpha, omega = dict(_meta_rows(text, ids["alpha"])), dict(_meta_rows(text, ids["omega"]))
    assert alpha["tool"] == "py-spy (py-spy 0.4.3)" and alpha["event"] == "wall-clock sampling"
    assert (alpha["rate"], alpha["window"], alpha["samples"]) == ("99 Hz", "3.0 s", "1,672")
    # The overhead from the stored figures: 18,000 / median(19,800, 20,000, 20,200) and 10,450 / 11,000.
    assert alpha["profiling overhead"] == "-10.0% req/s (0.900× the unprofiled median 20,000)"
    assert omega["profiling overhead"] == "-5.0% req/s (0.950× the unprofiled median 11,000)"
    assert omega["error"] == "perf lost 12 samples" and "error" not in alpha
    [top] = tables(text, f"profile-top-{ids['omega']}")
    assert top == [["frame (self)", "samples", "share"], ["tcp_sendmsg_[k]", "500", "50.0%"],
                   ["write", "300", "30.0%"], ["entry_SYSCALL_64_[k]", "200", "20.0%"]]
    [top] = tables(text, f"profile-top-{ids['alpha']}")
    assert top[1] == ["handle (server.py:55)", "370", "55.1%"] and len(top) == 5
    [split] = tables(text, f"profile-split-{ids['omega']}")
    assert split == [["own code", "framework", "runtime", "kernel", "unknown"],
                     ["300 (30.0%)", "0 (0.0%)", "0 (0.0%)", "700 (70.0%)", "0 (0.0%)"]]
    [split] = tables(text, f"profile-split-{ids['alpha']}")
    assert split[1][:3] == ["372 (55.4%)", "200 (29.8%)", "100 (14.9%)"]
    assert f'data-measurement="{ids["gamma"]}">not profiled: {UNSUPPORTED}' in text.replace("&#x27;", "'")


def _meta_rows(text: str, mid: int) -> list[list[str]]:
    """The tool/event/overhead table of one profiled measurement, its rows as [key, value]."""
    start = text.index(f'<table class="kv profile-meta" data-measurement="{mid}">')
    end = text.index("</table>", start) + len("</table>")
    [rows] = tables(text[start:end], "profile-meta")
    return rows


def test_prof_badge_only_on_the_profiled_measurements_rows(written):
    _, _, ids, path = written
    text = path.read_text()
    rows = re.findall(r'<tr id="m(\d+)"[^>]*>(.*?)</tr>', text, re.S)
    badged = {int(mid) for mid, row in rows if 'data-badge="PROF"' in row}
    assert badged == {ids["alpha"], ids["omega"]}  # gamma's repeat was not profiled: no badge
    assert all('data-discarded=' not in row for _, row in rows)  # none reads as discarded noise
    gamma = dict(rows)[str(ids["gamma"])].replace("&#x27;", "'")
    assert f"profiling repeat, kept out of the figures; not profiled: {UNSUPPORTED}" in gamma
    for row in re.findall(r'<tr[^>]*data-level="c=10,w=1">.*?</tr>', text, re.S):  # the groups' rows
        assert 'data-badge="PROF"' not in row
    assert "3 profiled (see Profiles)" in text and "discarded as noisy" not in text


def test_terminal_has_a_line_per_profiled_measurement(written):
    results, run_id, ids, _ = written
    text = render_text(load_report(results, run_id), width=400)
    assert "profiled: 3 repeat(s), kept out of the figures: " + " ".join(f"#{i}" for i in sorted(ids.values())) \
        in text
    assert "discarded:" not in text
    lines = {line.strip().split(" ")[0]: line.strip() for line in text.splitlines() if " c=10,w=1 #" in line}
    assert lines["alpha"] == (f"alpha hello c=10,w=1 #{ids['alpha']}: profiling overhead -10.0% req/s (0.900× the "
                              "unprofiled median 20,000); 1,672 samples (py-spy, wall-clock sampling); top self: "
                              "handle (server.py:55) 55.1%, parse (fw/http.py:12) 29.8%, "
                              "_run_once (asyncio/base_events.py:1900) 14.9%")
    assert lines["omega"].endswith("top self: tcp_sendmsg_[k] 50.0%, write 30.0%, entry_SYSCALL_64_[k] 20.0%; "
                                   "partial: perf lost 12 samples")
    assert lines["gamma"] == f"gamma hello c=10,w=1 #{ids['gamma']}: not profiled: {UNSUPPORTED}"


def test_markdown_counts_profiled_repeats_apart_from_discarded_ones(written):
    results, run_id, ids, _ = written
    text = render_markdown(load_report(results, run_id))
    assert "- profiled: 3 repeat(s), kept out of the figures: " + " ".join(f"#{i}" for i in sorted(ids.values())) \
        in text
    assert "discarded:" not in text


def test_export_folded_writes_the_stored_text_exactly(written, tmp_path, cache_dir):
    results, run_id, ids, _ = written
    out = tmp_path / "flames"
    done = run_cli(["export", str(run_id), "--results", results, "--folded", out], cache_dir)
    assert done.returncode == 0, done.stderr
    expected = {f"{ids['alpha']}-alpha-hello-c=10_w=1.cpu.folded": ALPHA_CPU,
                f"{ids['alpha']}-alpha-hello-c=10_w=1.idle.folded": ALPHA_IDLE,
                f"{ids['omega']}-omega-hello-c=10_w=1.cpu.folded": OMEGA_CPU}
    assert {p.name: p.read_bytes().decode() for p in out.iterdir()} == expected
    for name in expected:
        assert f"wrote {out / name}" in done.stdout
    assert "3 folded file(s)" in done.stdout


def test_export_folded_bad_input(written, tmp_path, cache_dir):
    results, run_id, _, _ = written
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    done = run_cli(["export", str(run_id), "--results", results, "--folded", a_file], cache_dir)
    assert done.returncode == 2 and "exists and is not a folder" in done.stderr and a_file.read_text() == "x"
    done = run_cli(["export", "--results", results, "--folded", tmp_path / "x", "--json"], cache_dir)
    assert done.returncode == 2 and "give it without --json" in done.stderr and not (tmp_path / "x").exists()
    # A run without profiles: nothing to write, exit 1, no folder made.
    other = tmp_path / "unprofiled"
    store = Store(other)
    plain, _ = populate(store, profiled=False)
    store.close()
    done = run_cli(["export", str(plain), "--results", other, "--folded", tmp_path / "none"], cache_dir)
    assert done.returncode == 1 and f"run {plain} has no profile" in done.stderr
    assert not (tmp_path / "none").exists()


def test_write_folded_leaves_nothing_when_a_file_fails(tmp_path):
    folder = tmp_path / "new"
    with pytest.raises(OSError):
        # The second name needs a folder that is not there: the first, already written beside its name, goes too.
        write_folded({"1-a.cpu.folded": "a 1\n", "missing/2-b.cpu.folded": "b 1\n"}, folder)
    assert not folder.exists()
    existing = tmp_path / "existing"
    existing.mkdir()
    with pytest.raises(OSError):
        write_folded({"1-a.cpu.folded": "a 1\n", "missing/2-b.cpu.folded": "b 1\n"}, existing)
    assert list(existing.iterdir()) == []


def test_profiles_in_headless_chromium_offline(written):
    _, _, _, path = written
    driver, profile = _browser()
    try:
        requested = _open_offline(driver, path.as_uri())
        assert [u for u in requested if not u.startswith(("file:", "data:", "blob:", "about:"))] == []
        icicles = driver.execute_script(
            "return Array.from(document.querySelectorAll('.plotly-graph-div'))"
            ".filter(g => (g._fullData || []).some(t => t.type === 'icicle'))"
            ".map(g => ({title: g.closest('.chart').getAttribute('data-chart'),"
            " boxes: g.querySelectorAll('.iciclelayer path.surface').length,"
            " nodes: g.data[0].ids.length}))")
        assert len(icicles) == 3, icicles
        for chart in icicles:
            assert chart["boxes"] == chart["nodes"], chart  # every node drawn as a box
        severe = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        assert severe == []
        driver.execute_script("document.getElementById('profiles').scrollIntoView()")
        ARTIFACTS.mkdir(exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "report-profiles.png"))
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_flame_graph_cap_raises_the_share_until_it_fits_and_says_so():
    # 150 stacks of 20 frames, one sample each: every frame holds 1/150 (0.67%) of the samples, above the 0.5%
    # merge share, so 3,000 boxes would be drawn; past MAX_NODES the share doubles to 1% and they merge.
    folded = "".join(";".join(f"f{i}_{d}" for d in range(20)) + " 1\n" for i in range(150))
    tree = profiles.build_tree(folded)
    assert len(tree.ids) <= profiles.MAX_NODES
    assert tree.merge_below_share == pytest.approx(0.01)
    assert (tree.labels, tree.values, tree.merged_frames, tree.merged_samples) == (["all", "(other)"], [150, 150],
                                                                                   3000, 150)
    assert profiles.cap_note(tree) == ("150 distinct stacks; 3,000 frame node(s) under 1.0% of the samples each "
                                       "(150 samples in all) are merged into \"(other)\" under their parent")
    # Within the cap, the same stacks keep every box.
    assert len(profiles.build_tree(folded, max_nodes=4000).ids) == 1 + 3000


def test_a_differential_tree_is_bs_stacks_with_as_samples_by_the_same_path():
    a = "a;b 10\na;c 10\na;e 5\n"
    b = "a;b 300\na;d 100\na;e 1\n"  # e: 1 of 401 samples, merged into "(other)" under a
    tree = profiles.build_tree(b, baseline=a)
    nodes = {label: i for i, label in enumerate(tree.labels)}
    assert sorted(nodes) == ["(other)", "a", "all", "b", "d"]  # B's tree: c (only in A) is not drawn
    assert (tree.total, tree.baseline_total) == (401, 25)
    baseline = {label: tree.baseline[i] for label, i in nodes.items()}
    # "(other)" under a holds A's samples under a in no frame drawn beside it: c and e.
    assert baseline == {"all": 25, "a": 25, "b": 10, "d": 0, "(other)": 15}
    deltas = dict(zip(tree.labels, tree.deltas()))
    assert deltas["all"] == deltas["a"] == 0
    assert deltas["b"] == pytest.approx(300 / 401 - 10 / 25) and deltas["d"] == pytest.approx(100 / 401)
    assert deltas["(other)"] == pytest.approx(1 / 401 - 15 / 25)
    # Without a baseline the same tree, and no baseline figures.
    plain = profiles.build_tree(b)
    assert (plain.labels, plain.values, plain.baseline) == (tree.labels, tree.values, None)


def test_self_changes_are_shares_of_each_profile_largest_move_first():
    changes = profiles.self_changes("a;b 10\na;c 10\na;e 5\n", "a;b 300\na;d 100\na;e 1\n", n=3)
    assert [(c.frame, round(c.a_share, 4), round(c.b_share, 4)) for c in changes] == [
        ("c", 0.4, 0.0), ("b", 0.4, round(300 / 401, 4)), ("d", 0.0, round(100 / 401, 4))]  # -40, +34.8, +24.9
    assert profiles.change_text(changes[0]) == "c 40.0% → 0.0% (-40.0 points)"
    assert profiles.self_changes("a 3\n", "a 7\n") == []  # the same shares: nothing moved
