"""Installs follow the plan: optional parts ([install.optional]) only when a planned scenario needs them, and then
once; contestants install concurrently and a failing one fails alone; the estimate covers installs from the
cache's state; the run reports each phase's time. Real installs (real processes) into a private cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import FIXTURE_CONTESTANTS, REPO, db_rows, run_cli, write_suite
from netarena import contestants as ct, python_env
from netarena.config import Suite
from netarena.errors import ConfigError
from netarena.ports import free_port
from netarena.plan.suite import build_plan, install_phase_s

# A contestant whose base step and optional `mongo` part each append a line to {env_dir}/runs, so a test sees
# exactly which ran and how often.
PARTS_MANIFEST = """
name = "fx-parts"
display_name = "fixture with an optional install part"
language = "c"
runtime = "native"
framework = "none"
framework_version = "0"
concurrency_model = "threads"
scenarios = ["hello", "mongo"]
needs = ["mongo"]

[unsupported]
echo = "fixture"
bytes = "fixture"
json = "fixture"
static = "fixture"
sleep = "fixture"

[install]
requires = ["sh"]
steps = [["sh", "-c", "echo base >> {env_dir}/runs"]]

[install.optional.mongo]
scenarios = ["mongo"]
steps = [["sh", "-c", "echo mongo >> {env_dir}/runs"]]

[start]
command = ["sh", "-c", "exit 1", "{mongo_url}"]
"""


def _suite(*scenarios: str) -> Suite:
    return Suite.model_validate({"name": "t", "measure": [{"scenario": s, "connections": [1]} for s in scenarios]})


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("NETARENA_CACHE", str(root))
    return root


def _contestant(where: Path, manifest: str = PARTS_MANIFEST, name: str = "fx-parts") -> ct.Contestant:
    folder = where / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "contestant.toml").write_text(manifest)
    return ct.load(where, [name])[0]


def _runs(contestant: ct.Contestant) -> list[str]:
    runs = contestant.env_dir / "runs"
    return runs.read_text().split() if runs.exists() else []


def _install_for(contestant: ct.Contestant, *scenarios: str) -> None:
    plan = build_plan(_suite(*scenarios), [contestant])
    ct.install(contestant, allow_apt=False, parts=plan.install_parts(contestant))


def test_a_plan_without_mongo_skips_the_part_and_a_later_one_with_mongo_builds_it_once(cache, tmp_path):
    contestant = _contestant(tmp_path / "contestants")
    _install_for(contestant, "hello")
    assert _runs(contestant) == ["base"]
    _install_for(contestant, "hello", "mongo")
    assert _runs(contestant) == ["base", "mongo"]  # the part on top of the base, which is not rebuilt
    _install_for(contestant, "mongo")
    _install_for(contestant, "hello")  # a build with the part serves a plan without it too
    assert _runs(contestant) == ["base", "mongo"]
    # A changed contestant rebuilds the base and only the parts the plan asks for now.
    (contestant.dir / "server.c").write_text("/* changed */\n")
    _install_for(contestant, "hello")
    assert _runs(contestant) == ["base", "mongo", "base"]


def test_a_part_instead_of_the_steps_runs_alone_when_nothing_is_built(cache, tmp_path):
    """A part whose steps build all the base does (a cargo feature build) replaces the base steps when nothing
    is built yet; on top of a base build it runs alone too; a plan without it then reuses that build."""
    replacing = PARTS_MANIFEST.replace('scenarios = ["mongo"]\nsteps', 'scenarios = ["mongo"]\ninstead_of_steps = true\nsteps')
    fresh = _contestant(tmp_path / "a", replacing)
    _install_for(fresh, "hello", "mongo")
    assert _runs(fresh) == ["mongo"]
    _install_for(fresh, "hello")
    assert _runs(fresh) == ["mongo"]
    assert fresh.env_dir.name == "fx-parts"
    shutil.rmtree(fresh.env_dir)
    later = _contestant(tmp_path / "b", replacing)
    _install_for(later, "hello")
    _install_for(later, "hello", "mongo")
    assert _runs(later) == ["base", "mongo"]


# Two parts built as one cargo build would be: each step records its part and the {install_parts} it was given.
TWO_PARTS_MANIFEST = (PARTS_MANIFEST
                      .replace('scenarios = ["hello", "mongo"]\nneeds = ["mongo"]',
                               'scenarios = ["hello", "mongo", "db"]\nneeds = ["mongo", "postgresql"]')
                      .replace('steps = [["sh", "-c", "echo mongo >> {env_dir}/runs"]]',
                               'instead_of_steps = true\nsteps = [["sh", "-c", "echo mongo:{install_parts} >> {env_dir}/runs"]]\n\n'
                               '[install.optional.postgresql]\nscenarios = ["db"]\ninstead_of_steps = true\n'
                               'steps = [["sh", "-c", "echo postgresql:{install_parts} >> {env_dir}/runs"]]\n\n'
                               '[database]\npool = 2\nhow = "fixture"')
                      .replace('"{mongo_url}"]', '"{mongo_url}", "{postgresql_url}", "{db_pool}"]'))


def test_a_second_part_is_built_with_the_parts_built_before(cache, tmp_path):
    """A part's build replaces the binary (a cargo build with its feature): {install_parts} names every part
    the build ends up with, so a postgresql part after a mongo one keeps the MongoDB driver."""
    contestant = _contestant(tmp_path / "contestants", TWO_PARTS_MANIFEST)
    _install_for(contestant, "hello", "mongo")
    assert _runs(contestant) == ["mongo:mongo"]
    _install_for(contestant, "db")
    assert _runs(contestant) == ["mongo:mongo", "postgresql:mongo,postgresql"]
    _install_for(contestant, "mongo", "db")  # both built: nothing to do
    assert len(_runs(contestant)) == 2
    shutil.rmtree(contestant.env_dir)  # nothing built: both parts asked for at once make one build with both
    both = _contestant(tmp_path / "fresh", TWO_PARTS_MANIFEST)
    _install_for(both, "mongo", "db")
    assert _runs(both) == ["mongo:mongo,postgresql", "postgresql:mongo,postgresql"]


def test_a_part_that_builds_something_else_stays_out_of_the_bases_build(cache, tmp_path):
    """A part not `instead_of_steps` (a second binary, for HTTP/2) is not in {install_parts}: the base's
    feature build asked for beside it stays without its feature, and it sees the base's parts."""
    manifest = TWO_PARTS_MANIFEST.replace('needs = ["mongo", "postgresql"]',
                                          'needs = ["mongo", "postgresql"]\nprotocols = ["h1", "h2"]') + """
[install.optional.h2]
protocols = ["h2"]
steps = [["sh", "-c", "echo h2:{install_parts} >> {env_dir}/runs"]]
"""
    contestant = _contestant(tmp_path / "contestants", manifest)
    suite = Suite.model_validate({"name": "t", "measure": [{"scenario": "mongo", "connections": [1]},
                                                           {"scenario": "hello", "connections": [1], "protocol": ["h2"]}]})
    ct.install(contestant, allow_apt=False, parts=build_plan(suite, [contestant]).install_parts(contestant))
    assert _runs(contestant) == ["mongo:mongo", "h2:mongo"]


def test_a_change_in_a_build_input_outside_the_folder_rebuilds(cache, tmp_path):
    """[install] build_inputs (a crate or Go module shared by several contestants: contestants/_rust-shared,
    contestants/_go-shared) count in the build's stamp as the contestant's own files do; a name that is not a
    folder is refused, at its line."""
    where = tmp_path / "contestants"
    (where / "shared").mkdir(parents=True)
    (where / "shared" / "lib.rs").write_text("// one\n")
    manifest = PARTS_MANIFEST.replace('requires = ["sh"]', 'requires = ["sh"]\nbuild_inputs = ["../shared"]')
    contestant = _contestant(where, manifest)
    _install_for(contestant, "hello")
    _install_for(contestant, "hello")
    assert _runs(contestant) == ["base"]
    (where / "shared" / "lib.rs").write_text("// two\n")
    assert not ct.install_current(contestant)
    _install_for(contestant, "hello")
    assert _runs(contestant) == ["base", "base"]
    with pytest.raises(ConfigError, match="'../elsewhere' is not a folder") as info:
        _contestant(tmp_path / "b", manifest.replace("../shared", "../elsewhere"))
    assert info.value.line is not None


def test_an_optional_part_is_checked_like_the_steps(tmp_path):
    with pytest.raises(ConfigError, match="'gridfs' is not one of this contestant's scenarios") as info:
        _contestant(tmp_path / "a", PARTS_MANIFEST.replace('scenarios = ["mongo"]\nsteps',
                                                           'scenarios = ["gridfs"]\nsteps'))
    assert info.value.line is not None
    with pytest.raises(ConfigError, match="unknown placeholder '{port}'"):
        _contestant(tmp_path / "b", PARTS_MANIFEST.replace("echo mongo >>", "echo {port} >>"))
    with pytest.raises(ConfigError, match="unknown key 'step'"):
        _contestant(tmp_path / "c", PARTS_MANIFEST.replace('steps = [["sh", "-c", "echo mongo', 'step = [["sh", "-c", "echo mongo'))


# The fixture with a second part needed by its levels over TLS (a TLS library, an HTTP/2 build), whatever their
# scenario.
TLS_PART_MANIFEST = PARTS_MANIFEST.replace('needs = ["mongo"]', 'needs = ["mongo"]\nprotocols = ["h1", "h1-tls"]') + """
[install.optional.tls]
protocols = ["h1-tls"]
steps = [["sh", "-c", "echo tls >> {env_dir}/runs"]]
"""


def test_a_part_named_by_a_protocol_is_built_only_for_a_plan_with_a_level_over_it(cache, tmp_path):
    contestant = _contestant(tmp_path / "contestants", TLS_PART_MANIFEST)

    def install_for(*levels: tuple[str, str]) -> None:
        suite = Suite.model_validate({"name": "t", "measure": [{"scenario": s, "connections": [1], "protocol": [p]}
                                                               for s, p in levels]})
        plan = build_plan(suite, [contestant])
        ct.install(contestant, allow_apt=False, parts=plan.install_parts(contestant))

    install_for(("hello", "h1"), ("mongo", "h1"))
    assert _runs(contestant) == ["base", "mongo"]
    install_for(("hello", "h1-tls"))
    assert _runs(contestant) == ["base", "mongo", "tls"]
    install_for(("hello", "h1-tls"), ("hello", "h1"))
    assert _runs(contestant) == ["base", "mongo", "tls"]  # once
    assert ct.install_parts(contestant, [("mongo", "h1-tls")]) == ["mongo", "tls"]
    assert ct.install_parts(contestant, [("hello", "h1")]) == []


def test_a_parts_own_executables_are_needed_only_when_it_is_asked_for(cache, tmp_path):
    """A part's `requires` (cargo for pypy-twisted's TLS part) makes the contestant unavailable, with the missing
    executable named, only for a plan that needs the part; the install then refuses before any step runs."""
    contestant = _contestant(tmp_path / "contestants", TLS_PART_MANIFEST.replace(
        'protocols = ["h1-tls"]\nsteps', 'protocols = ["h1-tls"]\nrequires = ["netarena-no-such-tool"]\nsteps'))
    assert ct.availability(contestant, allow_apt=False).runnable
    without = ct.availability(contestant, allow_apt=False, parts=["tls"])
    assert not without.runnable and "netarena-no-such-tool not installed" in without.summary, without.summary
    with pytest.raises(ct.InstallError, match="netarena-no-such-tool not installed"):
        ct.install(contestant, allow_apt=False, parts=["tls"])
    assert _runs(contestant) == []
    ct.install(contestant, allow_apt=False, parts=[])
    assert _runs(contestant) == ["base"]


def test_a_part_names_the_levels_that_need_it(tmp_path):
    with pytest.raises(ConfigError, match="'h2' is not one of this contestant's protocols") as info:
        _contestant(tmp_path / "a", TLS_PART_MANIFEST.replace('protocols = ["h1-tls"]\nsteps', 'protocols = ["h2"]\nsteps'))
    assert info.value.line is not None
    with pytest.raises(ConfigError, match="names neither scenarios nor protocols"):
        _contestant(tmp_path / "b", TLS_PART_MANIFEST.replace('protocols = ["h1-tls"]\nsteps', 'steps'))


# The TLS fixture with a venv, its part installing into it as a Python TLS library would: the part's steps mark the
# venv they ran in and say which uv and uv cache they were given.
VENV_PART_MANIFEST = TLS_PART_MANIFEST.replace(
    'requires = ["sh"]', 'requires = ["sh"]\npython_requirements = "requirements.txt"').replace(
    'steps = [["sh", "-c", "echo tls >> {env_dir}/runs"]]',
    """steps = [["sh", "-c", "echo tls >> {env_dir}/runs"],
         ["{python}", "-c", 'import pathlib, sys; pathlib.Path(sys.prefix, "tls-part").touch()'],
         ["sh", "-c", "{uv} --version > {env_dir}/uv-version && echo uv-cache:$UV_CACHE_DIR >> {env_dir}/runs"]]""")


def test_a_part_installing_into_the_venv_is_rebuilt_with_it_and_leaves_it_current(cache, tmp_path):
    """A part's packages in the venv ({uv} into {python}) do not make the venv look stale, and a venv made again
    (removed, or for changed requirements) is made without them: the part is built again into it."""
    where = tmp_path / "contestants"
    (where / "fx-parts").mkdir(parents=True)
    (where / "fx-parts" / "requirements.txt").write_text("# nothing: the fixture imports nothing\n")
    contestant = _contestant(where, VENV_PART_MANIFEST)
    tls_part_marker = contestant.venv_dir / "tls-part"
    venv_stamp = contestant.env_dir / "venv.stamp"

    def install_for(protocol: str) -> None:
        suite = Suite.model_validate({"name": "t", "measure": [{"scenario": "hello", "connections": [1],
                                                                "protocol": [protocol]}]})
        ct.install(contestant, allow_apt=False, parts=build_plan(suite, [contestant]).install_parts(contestant))

    install_for("h1")
    made = venv_stamp.stat().st_mtime_ns
    assert _runs(contestant) == ["base"] and not tls_part_marker.exists()
    install_for("h1-tls")
    # The part's steps get the uv and the uv cache the venv was made with.
    uv_cache = python_env.uv_cache_dir(cache, contestant.python())
    assert _runs(contestant) == ["base", "tls", f"uv-cache:{uv_cache}"] and tls_part_marker.exists()
    assert ct.install_current(contestant, ["tls"]) and venv_stamp.stat().st_mtime_ns == made
    shutil.rmtree(contestant.venv_dir)
    assert not ct.install_current(contestant, ["tls"])
    install_for("h1-tls")
    assert _runs(contestant)[3:] == ["base", "tls", f"uv-cache:{uv_cache}"] and tls_part_marker.exists()
    (contestant.dir / "requirements.txt").write_text("# changed\n")
    install_for("h1-tls")
    assert _runs(contestant)[6:] == ["base", "tls", f"uv-cache:{uv_cache}"] and tls_part_marker.exists()
    assert venv_stamp.stat().st_mtime_ns != made


def test_the_estimate_counts_installs_from_the_cache_state(cache, tmp_path):
    contestant = _contestant(tmp_path / "contestants")
    plan = build_plan(_suite("hello", "mongo"), [contestant])
    first = plan.estimate(jobs=2)
    assert first.installs == [("fx-parts", ct.DEFAULT_INSTALL_S["c"] + ct.DEFAULT_INSTALL_PART_S,
                               "default for c, mongo: default")]
    assert first.installs_s == ct.DEFAULT_INSTALL_S["c"] + ct.DEFAULT_INSTALL_PART_S
    assert first.total_s == first.installs_s + first.measuring_s == first.installs_s + plan.estimate_s()
    assert "installs" in first.describe() and "2 at a time" in first.describe()
    ct.install(contestant, allow_apt=False, parts=plan.install_parts(contestant))
    installed = plan.estimate(jobs=2)
    assert (installed.installs, installed.installs_s) == ([], 0)
    assert "installs: none needed" in installed.describe()
    # Changed: the base's figure is now this cache's own last time, the part's too.
    known = json.loads((contestant.env_dir / "install-time.json").read_text())
    assert set(known) == {"base_s", "parts_s"} and set(known["parts_s"]) == {"mongo"}
    (contestant.dir / "server.c").write_text("/* changed */\n")
    [(name, seconds, source)] = plan.estimate(jobs=2).installs
    assert (name, source) == ("fx-parts", "its last install here, mongo: its last build here")
    assert seconds == pytest.approx(known["base_s"] + known["parts_s"]["mongo"])
    # Installs of the estimate are not counted where nothing is installed on this machine (a cluster's).
    assert plan.estimate(jobs=2, installs=False).installs_s == 0


def _timed_contestants(tmp_path: Path, specs) -> list[ct.Contestant]:
    """Fixture contestants from (name, its last install's seconds here, its one shell step): the seconds are what
    install_concurrently orders them by (install_estimate_s)."""
    contestants = []
    for name, last_s, step in specs:
        manifest = PARTS_MANIFEST.replace('name = "fx-parts"', f'name = "{name}"').replace(
            'steps = [["sh", "-c", "echo base >> {env_dir}/runs"]]', f"steps = [{json.dumps(['sh', '-c', step])}]")
        contestant = _contestant(tmp_path / "contestants", manifest, name)
        contestant.env_dir.mkdir(parents=True)
        ct._remember_install_time(contestant, last_s, {})
        contestants.append(contestant)
    return contestants


def test_the_install_phase_is_the_longest_job_of_the_pool():
    assert install_phase_s([], 2) == 0
    alone = [(30, None), (20, None), (20, None)]
    assert install_phase_s(alone, 1) == 70
    assert install_phase_s(alone, 2) == 40  # 30 | 20 + 20
    assert install_phase_s(alone, 4) == 30
    # Two builds into one shared folder take turns; the job beside them does the rest meanwhile.
    shared = [(30, "cargo"), (20, "cargo"), (20, None), (10, None)]
    assert install_phase_s(shared, 2) == 50  # cargo 30 + cargo 20 | 20 + 10
    assert install_phase_s(shared, 4) == 50  # a free job does not start the second build early
    # The longest chain first: the two 40-s builds sharing a folder (80 s in all) before the single 50-s ones. By
    # the single figures (50, 50, then the chain) the chain's second build would run alone at the end: 130 s.
    chain = [(50, None), (50, None), (40, "cargo"), (40, "cargo")]
    assert install_phase_s(chain, 2) == 100  # cargo 40 + cargo 40 | 50 + 50
    assert [s for s, _ in ct.longest_chains_first(chain, seconds=lambda one: one[0], folder=lambda one: one[1])] \
        == [40, 40, 50, 50]


# Three contestants whose steps prove what ran beside what: fx-share-a and fx-share-b build into the shared cargo
# folder ({cargo_target_dir}) and fail if they ever hold it at once (a folder made there for the turn, refused
# while the other holds it); fx-beside builds into none and waits (30 s at most) for fx-share-a to have started,
# fx-share-a for it: both succeed only when an install runs beside the first shared build.
TURN_STEP = ("mkdir -p {cargo_target_dir} && mkdir {cargo_target_dir}/turn && touch {env_dir}/started && "
             "WAIT && sleep 0.3 && rmdir {cargo_target_dir}/turn")
WAIT_FOR = ("i=0; while [ ! -e {env_dir}/../OTHER/started ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; "
            "test -e {env_dir}/../OTHER/started")


def test_installs_sharing_a_build_folder_take_turns_while_another_runs_beside(cache, tmp_path):
    contestants = _timed_contestants(tmp_path, (
        ("fx-share-a", 300.0, TURN_STEP.replace("WAIT", WAIT_FOR.replace("OTHER", "fx-beside"))),
        ("fx-share-b", 200.0, TURN_STEP.replace("WAIT", "true")),
        ("fx-beside", 5.0, "touch {env_dir}/started; " + WAIT_FOR.replace("OTHER", "fx-share-a"))))
    shared = ct.shared_build_folder(contestants[0])
    assert shared is not None and shared == ct.shared_build_folder(contestants[1])
    assert ct.shared_build_folder(contestants[2]) is None
    ended = []
    ct.install_concurrently(contestants, lambda c: ct.install(c, allow_apt=False), 2,
                            lambda done: ended.append((done.contestant.name, done.error)))
    # Longest first would have started fx-share-b beside fx-share-a, both in the folder: fx-beside went instead.
    assert sorted(ended) == [("fx-beside", None), ("fx-share-a", None), ("fx-share-b", None)], ended
    assert ended[-1][0] == "fx-share-b"


def test_installs_sharing_a_folder_start_first_when_their_chain_is_the_longest(cache, tmp_path):
    """Two installs building into the shared cargo folder, 200 s each by their estimates, run one after the other:
    their chain (400 s) starts before a single 300-s install, which longest-first by single figures would start
    first (the chain's last build then running alone at the end)."""
    order = tmp_path / "contestants" / "order"
    contestants = _timed_contestants(tmp_path, [
        ("fx-alone", 300.0, "echo fx-alone >> {dir}/../order"),
        *((name, 200.0, f"mkdir -p {{cargo_target_dir}} && echo {name} >> {{dir}}/../order")
          for name in ("fx-chain-a", "fx-chain-b"))])
    assert ct.shared_build_folder(contestants[1]) == ct.shared_build_folder(contestants[2]) is not None
    assert ct.shared_build_folder(contestants[0]) is None
    ended = []
    ct.install_concurrently(contestants, lambda c: ct.install(c, allow_apt=False), 1,
                            lambda done: ended.append((done.contestant.name, done.error)))
    assert order.read_text().split() == ["fx-chain-a", "fx-chain-b", "fx-alone"]
    assert ended == [("fx-chain-a", None), ("fx-chain-b", None), ("fx-alone", None)]


def test_go_builds_share_gos_build_cache_and_take_turns():
    """Every contestant whose install runs `go build` shares Go's build cache (`go env GOCACHE`): two at once would
    each compile the standard library, so they take turns like builds into the shared cargo folder, while a
    contestant building with anything else runs beside them."""
    if shutil.which("go") is None:
        pytest.skip("no go here")
    cache_dir = subprocess.run(["go", "env", "GOCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    go = ct.load(REPO / "contestants", ["go-fasthttp", "go-gin", "go-net"])
    assert {ct.shared_build_folder(c) for c in go} == {Path(cache_dir)}
    [other] = ct.load(REPO / "contestants", ["node-http"])
    assert ct.shared_build_folder(other) is None
    folder = ct.shared_build_folder
    assert ct.next_install(go[1:] + [other], running=[go[0]], folder=folder) is other
    assert ct.next_install(go[1:], running=[go[0]], folder=folder) is None
    assert ct.next_install(go[1:], running=[other], folder=folder) is go[1]


def test_installs_start_longest_first_by_their_estimates(cache, tmp_path):
    """install_concurrently starts the installs in the order install_phase_s assumes: the longest estimate first
    (this cache's last install times here), whatever order it is given them in."""
    order = tmp_path / "contestants" / "order"  # beside the contestants: steps name no path outside their folder
    contestants = _timed_contestants(tmp_path, [(name, last_s, f"echo {name} >> {{dir}}/../order")
                                                for name, last_s in (("fx-short", 5.0), ("fx-long", 300.0),
                                                                     ("fx-middle", 40.0))])
    ended = []
    ct.install_concurrently(contestants, lambda c: ct.install(c, allow_apt=False), 1,
                            lambda done: ended.append((done.contestant.name, done.error)))
    assert order.read_text().split() == ["fx-long", "fx-middle", "fx-short"]
    assert ended == [("fx-long", None), ("fx-middle", None), ("fx-short", None)]


# Two contestants whose install steps each wait (30 s at most) for the other's to have started: both succeed
# only when they install at the same time. A third one's step fails.
WAITS_FOR_OTHER = ("touch {env_dir}/started; i=0; while [ ! -e {env_dir}/../OTHER/started ] && [ $i -lt 600 ]; "
                   "do sleep 0.05; i=$((i+1)); done; test -e {env_dir}/../OTHER/started")


def _concurrent_contestants(tmp_path: Path) -> Path:
    folder = tmp_path / "contestants"
    shutil.copytree(FIXTURE_CONTESTANTS / "_fixture-shared", folder / "_fixture-shared")
    shutil.copytree(FIXTURE_CONTESTANTS / "fx-install-fails", folder / "fx-install-fails")
    base = (FIXTURE_CONTESTANTS / "fx-install-fails" / "contestant.toml").read_text()
    for name, other in (("fx-par-a", "fx-par-b"), ("fx-par-b", "fx-par-a")):
        step = json.dumps(["sh", "-c", WAITS_FOR_OTHER.replace("OTHER", other)])
        manifest = base.replace('name = "fx-install-fails"', f'name = "{name}"').replace(
            'steps = [["sh", "-c", "echo fixture: install step failing >&2; exit 1"]]', f"steps = [{step}]")
        assert manifest != base
        _contestant(folder, manifest, name)
    return folder


def test_contestants_install_concurrently_and_a_failing_one_fails_alone(tmp_path, cache_dir, generator_binary,
                                                                         no_leftover_processes):
    """A real `netarena run`: the two waiting installs meet (so they ran at once), the failing one is skipped
    with its log's tail, the others are measured; one line per installed contestant; the estimate counted the
    installs; every phase's time is printed and stored."""
    contestants = _concurrent_contestants(tmp_path)
    suite = write_suite(tmp_path / "suite.toml", """name = "tiny"
contestants = ["fx-par-a", "fx-par-b", "fx-install-fails"]
repeat = 1
warmup_s = 0.2
duration_s = 0.5
timeout_s = 1

[[measure]]
scenario = "hello"
connections = [2]
""")
    results = tmp_path / "results"
    result = run_cli(["run", suite, "--results", results, "--contestants-dir", contestants, "--install-jobs", "3"],
                     cache_dir, timeout_s=300)
    err = result.stdout + result.stderr
    assert result.returncode == 0, err
    assert "estimated" in err and "installs " in err and "default for python" in err, err
    lines = err.splitlines()
    for name in ("fx-par-a", "fx-par-b"):
        assert sum(line.startswith(f"{name}: installed in ") for line in lines) == 1, err
    failed = [i for i, line in enumerate(lines) if "fx-install-fails: install failed after" in line]
    assert len(failed) == 1, err
    assert any("| fixture: install step failing" in line for line in lines[failed[0]:]), err  # its log's tail
    [skip] = db_rows(results, "SELECT * FROM skipped WHERE contestant='fx-install-fails'")
    assert "fixture: install step failing" in skip["detail"]
    statuses = {(r["contestant"], r["status"]) for r in db_rows(results, "SELECT * FROM measurements")}
    assert statuses == {("fx-par-a", "ok"), ("fx-par-b", "ok")}
    [run] = db_rows(results, "SELECT environment_json FROM runs")
    phases = json.loads(run["environment_json"])["phase_s"]
    assert list(phases) == ["installs", "measuring", "report"], phases
    assert any(line.startswith("took: installs ") and ", measuring " in line and ", report " in line
               for line in lines), err


def test_verify_installs_concurrently_and_reports_a_failed_install_with_its_log(tmp_path, cache_dir):
    contestants = _concurrent_contestants(tmp_path)
    result = run_cli(["verify", "fx-par-a", "fx-par-b", "fx-install-fails", "--contestants-dir", contestants,
                      "--install-jobs", "3"], cache_dir, timeout_s=300)
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "fx-par-a: ready after" in out and "fx-par-b: ready after" in out, out
    assert "fx-install-fails: install failed after" in out, out
    assert "fixture: install step failing" in out  # the install log's last lines, below the table



def test_verify_install_only_installs_and_starts_no_server(tmp_path, cache_dir, no_leftover_processes):
    """--install-only: refused with a server option; the installs as verify makes them (concurrently, each line as
    it ends), the failed one's log tail and exit 1, and no check: no server started (no server log), no verification table. Once all are
    installed, the same command finds them current and exits 0."""
    contestants = _concurrent_contestants(tmp_path)
    args = ["verify", "fx-par-a", "fx-par-b", "fx-install-fails", "--contestants-dir", contestants,
            "--install-jobs", "3", "--install-only"]
    refused = run_cli([*args, "--workers", "2"], cache_dir, timeout_s=60)  # a server option: refused, nothing made
    assert refused.returncode == 2 and "--install-only starts none" in refused.stderr, refused.stdout + refused.stderr
    assert not (cache_dir / "envs").exists() or not any((cache_dir / "envs").iterdir())
    result = run_cli(args, cache_dir, timeout_s=300)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "fx-par-a: ready after" in out and "fx-par-b: ready after" in out, out
    assert "fx-install-fails: install failed after" in out, out
    assert "fixture: install step failing" in out, out  # the failed install's log tail
    assert "│" not in out, out  # no verification table
    assert not (cache_dir / "verify-logs").exists() or not any((cache_dir / "verify-logs").iterdir())
    again = run_cli(args[:3] + args[4:], cache_dir, timeout_s=300)  # without fx-install-fails
    assert again.returncode == 0, again.stdout + again.stderr
    assert "fx-par-a: ready after" in again.stdout and "fx-par-b: ready after" in again.stdout, again.stdout


def test_verify_builds_the_parts_of_database_scenarios_only_when_asked(tmp_path, cache_dir):
    """verify starts no database, so it leaves the mongo part unbuilt; --build-all-parts builds it too, once,
    and the mongo scenario is still shown skipped (its database is not started)."""
    where = tmp_path / "contestants"
    _contestant(where)
    plain = run_cli(["verify", "fx-parts", "--contestants-dir", where, "--no-apt"], cache_dir, timeout_s=300)
    runs = cache_dir / "envs" / "fx-parts" / "runs"
    assert "fx-parts: ready after" in plain.stdout and runs.read_text().split() == ["base"], plain.stdout
    both = run_cli(["verify", "fx-parts", "--contestants-dir", where, "--no-apt", "--build-all-parts"], cache_dir,
                   timeout_s=300)
    assert "fx-parts: ready after" in both.stdout and runs.read_text().split() == ["base", "mongo"], both.stdout
    assert any("mongo" in line and "skipped" in line for line in both.stdout.splitlines()), both.stdout

# The cache the other tests install the bundled contestants into (test_contestants_verify, test_services_real),
# read before any test points NETARENA_CACHE at its own.
DEFAULT_CACHE = ct.cache_root()


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo (CI installs it)")
def test_rust_hyper_builds_the_mongodb_driver_only_for_a_plan_with_mongo(cache, tmp_path):
    """Real release builds of rust-hyper into a private cache. A plan without mongo builds the binary without
    the `mongodb` crate, which then refuses --mongo-url; a later plan with mongo runs the part's build, once,
    and its binary has the driver (which reads the URL). The shared cargo target folder ({cargo_target_dir})
    starts as a copy of the default cache's, when the bundled tests built the Rust contestants there, so the
    crates are compiled once for the whole suite (minutes on a slow machine) instead of twice: what is proved is
    what netarena runs (the install log's steps, the binary), not which crates cargo found fresh."""
    contestant = ct.load(REPO / "contestants", ["rust-hyper"])[0]
    shared = Path(contestant.placeholders()["cargo_target_dir"])
    built = DEFAULT_CACHE / shared.relative_to(ct.cache_root())
    if built.is_dir():
        # A copy, not links: cargo rewrites its fingerprint files in place, and the default cache must not change.
        # Under cargo's own lock of that folder, so a build running there (another netarena process) is never
        # half copied.
        with ct._exclusive(built / "release" / ".cargo-lock", "waiting for a cargo build in the default cache", print):
            shared.parent.mkdir(parents=True)
            subprocess.run(["cp", "-a", str(built), str(shared)], check=True)
    binary = contestant.env_dir / "build" / "netarena-rust-hyper"
    log = contestant.env_dir / "install.log"
    part_build = "(mongo): cargo build --release --locked --features mongo"

    def with_mongo_url(url: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(binary), "--mode", "http", "--port", str(free_port()), "--mongo-url", url],
                              capture_output=True, text=True, timeout=30)

    _install_for(contestant, "hello", "echo")
    first = log.read_text()
    assert "cargo build --release --locked --target-dir" in first and part_build not in first, first[-3000:]
    assert "Compiling mongodb " not in first, first[-3000:]
    refused = with_mongo_url("mongodb://127.0.0.1:9/x")
    assert refused.returncode == 2 and "without the `mongo` cargo feature" in refused.stderr, refused
    _install_for(contestant, "hello", "mongo")
    second = log.read_text()[len(first):]
    assert part_build in second, second[-3000:]
    # Built with the driver: it parses the URL, and refuses one that names no database.
    parsed = with_mongo_url("mongodb://127.0.0.1:9")
    assert parsed.returncode == 2 and "names no database" in parsed.stderr, parsed
    _install_for(contestant, "mongo")
    assert log.read_text().count(part_build) == 1
    assert log.read_text().count("Compiling mongodb ") <= 1
    assert os.access(binary, os.X_OK)


# A cargo crate whose binary prints the opt-level it was built at (cargo gives build scripts OPT_LEVEL).
OPT_LEVEL_CRATE = {
    "Cargo.toml": '[package]\nname = "fx-opt-level"\nversion = "0.1.0"\nedition = "2021"\n\n[workspace]\n\n'
                  '[profile.release]\nopt-level = 3\n',
    "build.rs": 'fn main() { println!("cargo:rustc-env=BUILT_OPT_LEVEL={}", std::env::var("OPT_LEVEL").unwrap()); }\n',
    "src/main.rs": 'fn main() { println!("{}", env!("BUILT_OPT_LEVEL")); }\n',
}
OPT_LEVEL_MANIFEST = PARTS_MANIFEST.replace('name = "fx-parts"', 'name = "fx-opt-level"').replace(
    'requires = ["sh"]\nsteps = [["sh", "-c", "echo base >> {env_dir}/runs"]]',
    'requires = ["cargo"]\nsteps = [["cargo", "build", "--release", "--offline", "--target-dir", "{build_dir}"]]')


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo (CI installs it)")
def test_quick_builds_build_cargo_steps_unoptimized_and_apart_from_optimized_ones(cache, tmp_path, monkeypatch):
    """NETARENA_QUICK_BUILDS=1: the cargo steps run at opt-level 0 and the install record says so; an install
    without it does not take that build as current and builds at the crate's own opt-level; each keeps its
    install time in a file of its own."""
    contestant = _contestant(tmp_path / "contestants", OPT_LEVEL_MANIFEST, "fx-opt-level")
    for name, text in OPT_LEVEL_CRATE.items():
        (contestant.dir / name).parent.mkdir(parents=True, exist_ok=True)
        (contestant.dir / name).write_text(text)
    binary = contestant.env_dir / "build" / "release" / "fx-opt-level"

    def built_at() -> str:
        return subprocess.run([str(binary)], capture_output=True, text=True, check=True, timeout=30).stdout.strip()

    monkeypatch.setenv(ct.QUICK_BUILDS_ENV, "1")
    record = ct.install(contestant, allow_apt=False)
    assert built_at() == "0"
    assert record["quick_build"]["CARGO_PROFILE_RELEASE_OPT_LEVEL"] == "0"
    assert (contestant.env_dir / "install-time-quick.json").is_file()
    assert ct.install_current(contestant)
    monkeypatch.setenv(ct.QUICK_BUILDS_ENV, "0")
    assert not ct.install_current(contestant)  # a quick build is not an optimized one
    record = ct.install(contestant, allow_apt=False)
    assert built_at() == "3" and "quick_build" not in record
    assert (contestant.env_dir / "install-time.json").is_file()
    monkeypatch.setenv(ct.QUICK_BUILDS_ENV, "1")
    assert not ct.install_current(contestant)  # nor the reverse


def test_quick_builds_leave_contestants_without_cargo_steps_alone(cache, tmp_path, monkeypatch):
    """Only cargo builds change: a contestant whose steps run no cargo installs, and stays current, the same."""
    contestant = _contestant(tmp_path / "contestants")
    monkeypatch.setenv(ct.QUICK_BUILDS_ENV, "1")
    assert "quick_build" not in ct.install(contestant, allow_apt=False)
    monkeypatch.setenv(ct.QUICK_BUILDS_ENV, "0")
    assert ct.install_current(contestant) and _runs(contestant) == ["base"]


# Two cargo contestants whose crates depend on one more crate beside them (a path dependency): what the shared
# target folder ({cargo_target_dir}) compiles once for both.
COMMON_CRATE = {"Cargo.toml": '[package]\nname = "fx-common"\nversion = "0.1.0"\nedition = "2021"\n',
                "src/lib.rs": 'pub const SHARED: &str = "shared";\n'}


def _sharing_contestant(where: Path, name: str) -> ct.Contestant:
    manifest = OPT_LEVEL_MANIFEST.replace('name = "fx-opt-level"', f'name = "{name}"').replace(
        'steps = [["cargo", "build", "--release", "--offline", "--target-dir", "{build_dir}"]]',
        f'steps = [["cargo", "build", "--release", "--offline", "--target-dir", "{{cargo_target_dir}}"],\n'
        f'         ["cp", "--remove-destination", "{{cargo_target_dir}}/release/{name}", "{{build_dir}}/{name}"]]')
    contestant = _contestant(where, manifest, name)
    (contestant.dir / "Cargo.toml").write_text(
        f'[package]\nname = "{name}"\nversion = "0.1.0"\nedition = "2021"\n\n[workspace]\n\n'
        '[dependencies]\nfx-common = { path = "../fx-common" }\n')
    (contestant.dir / "src").mkdir()
    (contestant.dir / "src" / "main.rs").write_text(f'fn main() {{ println!("{name} {{}}", fx_common::SHARED); }}\n')
    return contestant


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo (CI installs it)")
def test_cargo_contestants_share_the_crates_they_have_in_common_and_each_runs_its_own_binary(
        cache, tmp_path, monkeypatch):
    """{cargo_target_dir} is one cargo target folder for every contestant's build: the crate two contestants
    depend on is compiled by the first build only. Each binary is copied into its own {build_dir}, where the
    server runs it. Quick and optimized builds keep folders of their own (they write the same paths)."""
    where = tmp_path / "contestants"
    for name, text in COMMON_CRATE.items():
        (where / "fx-common" / name).parent.mkdir(parents=True, exist_ok=True)
        (where / "fx-common" / name).write_text(text)
    first, second = (_sharing_contestant(where, name) for name in ("fx-share-a", "fx-share-b"))
    monkeypatch.setenv(ct.QUICK_BUILDS_ENV, "1")
    assert first.placeholders()["cargo_target_dir"] == str(cache / "cargo-target" / "quick")

    def built(contestant: ct.Contestant) -> tuple[str, str]:
        """(what its binary prints, the install log of its last install)."""
        ct.install(contestant, allow_apt=False)
        ran = subprocess.run([str(contestant.env_dir / "build" / contestant.name)], capture_output=True,
                             text=True, check=True, timeout=30)
        return ran.stdout.strip(), (contestant.env_dir / "install.log").read_text()

    said, log = built(first)
    assert said == "fx-share-a shared" and "Compiling fx-common" in log, log[-3000:]
    said, log = built(second)
    assert said == "fx-share-b shared", said
    assert "Compiling fx-share-b" in log and "Compiling fx-common" not in log, log[-3000:]
    monkeypatch.setenv(ct.QUICK_BUILDS_ENV, "0")
    assert first.placeholders()["cargo_target_dir"] == str(cache / "cargo-target" / "optimized")
    said, log = built(first)
    assert said == "fx-share-a shared" and "Compiling fx-common" in log, log[-3000:]


def test_install_only_with_all_parts_installs_the_services_of_the_database_scenarios(tmp_path, cache_dir):
    """--install-only --build-all-parts installs the database a contestant's database scenarios need, beside it, as
    a run measuring them would (a line as it ends, its folder in the cache's services folder); without
    --build-all-parts those scenarios are not installed for, so neither is their database."""
    contestants = tmp_path / "contestants"
    shutil.copytree(FIXTURE_CONTESTANTS / "_fixture-shared", contestants / "_fixture-shared")
    shutil.copytree(FIXTURE_CONTESTANTS / "fx-pg", contestants / "fx-pg")
    args = ["verify", "fx-pg", "--contestants-dir", contestants, "--install-only"]
    plain = run_cli(args, cache_dir, timeout_s=300)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "fx-pg: ready after" in plain.stdout and "postgresql" not in plain.stdout, plain.stdout
    assert not (cache_dir / "services").exists()
    both = run_cli([*args, "--build-all-parts"], cache_dir, timeout_s=600)
    assert both.returncode == 0, both.stdout + both.stderr
    assert "fx-pg: ready after" in both.stdout and "postgresql: ready after" in both.stdout, both.stdout
    assert (cache_dir / "services" / "postgresql").is_dir()  # its folder in the cache, where runs look
