"""Manifests and suites: strict validation, messages naming file, line, field and near miss; exit code 2."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import FIXTURE_CONTESTANTS, run_cli, write_suite
from netarena.config import load_manifest, load_suite
from netarena.errors import ConfigError

GOOD = (FIXTURE_CONTESTANTS / "fx-good" / "contestant.toml").read_text()


def manifest_dir(tmp_path: Path, text: str, name: str = "fx-good") -> Path:
    folder = tmp_path / "contestants" / name
    folder.mkdir(parents=True)
    (folder / "contestant.toml").write_text(text)
    return folder / "contestant.toml"


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_fixture_manifests_are_valid():
    for path in sorted(FIXTURE_CONTESTANTS.glob("*/contestant.toml")):
        manifest = load_manifest(path)
        assert manifest.name == path.parent.name


def test_unknown_key_names_line_and_near_miss(tmp_path):
    text = GOOD.replace("stop_timeout_s = 2", "stop_timeout_s = 2\nready_timout_s = 3")
    path = manifest_dir(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_manifest(path)
    message = err.value.render()
    assert f"{path}:{line_of(text, 'ready_timout_s')}:" in message
    assert "unknown key 'ready_timout_s'" in message
    assert "did you mean 'ready_timeout_s'?" in message
    assert err.value.field == "start"


def test_nagle_stall_names_only_nagle_checked_scenarios(tmp_path):
    text = GOOD + '\n[nagle_stall]\nhelo = "no TCP_NODELAY option"\n'
    path = manifest_dir(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_manifest(path)
    assert err.value.field == "nagle_stall.helo"
    assert err.value.line == line_of(text, "helo =")
    assert "did you mean 'hello'?" in err.value.render()
    text = GOOD + '\n[nagle_stall]\nhello = "no TCP_NODELAY option"\n'
    path.write_text(text)
    assert load_manifest(path).nagle_stall == {"hello": "no TCP_NODELAY option"}


def test_bad_enum_value_suggests_the_near_miss(tmp_path):
    text = GOOD.replace("stop_timeout_s = 2", 'stop_signal = "SIGTREM"\nstop_timeout_s = 2')
    path = manifest_dir(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_manifest(path)
    assert err.value.field == "start.stop_signal"
    assert err.value.line == line_of(text, "SIGTREM")
    assert "did you mean 'SIGTERM'?" in err.value.render()


def test_malformed_toml_reports_the_line(tmp_path):
    text = GOOD.replace('framework = "http.server"', 'framework = "http.server')
    path = manifest_dir(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_manifest(path)
    assert err.value.line == line_of(text, 'framework = "http.server')
    assert "malformed TOML" in err.value.render()


def test_name_must_match_folder(tmp_path):
    path = manifest_dir(tmp_path, GOOD, name="other-name")
    with pytest.raises(ConfigError, match="must equal the folder name 'other-name'"):
        load_manifest(path)


def test_every_unimplemented_scenario_needs_a_reason(tmp_path):
    path = manifest_dir(tmp_path, GOOD.replace('static = "fixtures do not serve files"', ""))
    with pytest.raises(ConfigError, match="missing: static"):
        load_manifest(path)


def test_unknown_placeholder(tmp_path):
    text = GOOD.replace('"--port", "{port}"]', '"--port", "{prot}"]')
    path = manifest_dir(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_manifest(path)
    assert "unknown placeholder '{prot}'" in err.value.render()
    assert "did you mean 'port'?" in err.value.render()
    assert err.value.field == "start.command"


def test_echo_needs_echo_command(tmp_path):
    text = "\n".join(line for line in GOOD.splitlines() if not line.startswith("echo_command"))
    path = manifest_dir(tmp_path, text)
    with pytest.raises(ConfigError, match="required when 'echo' is listed"):
        load_manifest(path)


def test_serves_from_static_set_names_only_its_own_scenarios(tmp_path):
    text = GOOD.replace("\nscenarios = ", '\nserves_from_static_set = ["bytes", "mongo"]\nscenarios = ', 1)
    with pytest.raises(ConfigError) as err:
        load_manifest(manifest_dir(tmp_path, text))
    assert err.value.field == "serves_from_static_set"
    assert "'mongo' is not one of this contestant's scenarios" in err.value.render()


SUITE = """name = "tiny"
repeat = 1

[[measure]]
scenario = "hello"
connections = [4]
"""


def test_suite_unknown_key_in_array_of_tables(tmp_path):
    text = SUITE + '\n[[measure]]\nscenario = "echo"\nconnectons = [2]\n'
    path = write_suite(tmp_path / "s.toml", text)
    with pytest.raises(ConfigError) as err:
        load_suite(path)
    assert err.value.line == line_of(text, "connectons")
    assert err.value.field == "measure[1]"
    assert "did you mean 'connections'?" in err.value.render()


def test_suite_unknown_scenario_and_misplaced_parameter(tmp_path):
    path = write_suite(tmp_path / "s.toml", SUITE.replace('"hello"', '"helo"'))
    with pytest.raises(ConfigError, match="did you mean 'hello'"):
        load_suite(path)
    path = write_suite(tmp_path / "t.toml", SUITE + "sizes = [40]\n")
    with pytest.raises(ConfigError, match='only allowed with scenario = "bytes"'):
        load_suite(path)


def test_suite_impossible_values(tmp_path):
    path = write_suite(tmp_path / "s.toml", SUITE.replace("repeat = 1", "repeat = 0"))
    with pytest.raises(ConfigError) as err:
        load_suite(path)
    assert err.value.field == "repeat" and err.value.line == 2


def test_cli_bad_suite_exits_2_and_starts_nothing(tmp_path, cache_dir):
    path = write_suite(tmp_path / "bad.toml", SUITE.replace("repeat = 1", "repeats = 1"))
    results = tmp_path / "results"
    result = run_cli(["run", path, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS], cache_dir)
    assert result.returncode == 2, result.stderr
    assert f"{path}:2:" in result.stderr and "did you mean 'repeat'?" in result.stderr
    assert not results.exists()


def test_cli_unknown_contestant_exits_2_with_near_miss(tmp_path, cache_dir):
    path = write_suite(tmp_path / "s.toml", SUITE)
    result = run_cli(["run", path, "--only", "fx-godo", "--results", tmp_path / "r", "--contestants-dir",
                      FIXTURE_CONTESTANTS], cache_dir)
    assert result.returncode == 2
    assert "unknown contestant 'fx-godo'" in result.stderr and "did you mean 'fx-good'?" in result.stderr


def test_cli_unknown_contestant_in_a_suite_names_file_and_line(tmp_path, cache_dir):
    text = SUITE.replace('repeat = 1\n', 'repeat = 1\ncontestants = [\n  "fx-good",\n  "fx-othre",\n]\n')
    path = write_suite(tmp_path / "s.toml", text)
    results = tmp_path / "r"
    result = run_cli(["run", path, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS], cache_dir)
    assert result.returncode == 2, result.stderr
    assert f"{path}:5: contestants: unknown contestant 'fx-othre'" in result.stderr, result.stderr
    assert "did you mean 'fx-other'?" in result.stderr
    assert not results.exists()


def test_cli_bad_manifest_stops_everything(tmp_path, cache_dir):
    contestants = tmp_path / "contestants"
    shutil.copytree(FIXTURE_CONTESTANTS / "fx-good", contestants / "fx-good")
    (contestants / "fx-good" / "contestant.toml").write_text(GOOD.replace('concurrency_model = "threads"',
                                                                           'concurrency_model = "thread"'))
    path = write_suite(tmp_path / "s.toml", SUITE)
    result = run_cli(["run", path, "--results", tmp_path / "r", "--contestants-dir", contestants], cache_dir)
    assert result.returncode == 2
    assert "contestant.toml" in result.stderr and "concurrency_model" in result.stderr
    assert "did you mean 'threads'?" in result.stderr
    assert not (tmp_path / "r").exists()


def test_cli_bad_option_values(tmp_path, cache_dir):
    path = write_suite(tmp_path / "s.toml", SUITE)
    common = ["--results", tmp_path / "r", "--contestants-dir", FIXTURE_CONTESTANTS, "--backend", "mock"]
    for extra, needle in ((["--repeat", "0"], "--repeat"), (["--duration", "fast"], "--duration"),
                          (["--scenario", "helo"], "did you mean 'hello'"),
                          (["--server-cpus", "0", "--generator-cpus", "0"], "overlap")):
        result = run_cli(["run", path, *common, *extra], cache_dir)
        assert result.returncode == 2, (extra, result.stderr)
        assert needle in result.stderr, (extra, result.stderr)
    assert not (tmp_path / "r").exists()


def test_cli_connections_above_the_machine_limit(tmp_path, cache_dir, generator_binary):
    path = write_suite(tmp_path / "s.toml", SUITE.replace("connections = [4]", "connections = [1000000]"))
    result = run_cli(["run", path, "--results", tmp_path / "r", "--contestants-dir", FIXTURE_CONTESTANTS], cache_dir)
    assert result.returncode == 2, result.stderr
    # The generator side would be spread over processes; the server (one process) cannot hold them.
    assert "every planned level is skipped" in result.stderr
    assert "fx-good hello c=1000000,w=1: cannot hold 1,000,000 connections here" in result.stderr
    assert "netarena doctor" in result.stderr and not (tmp_path / "r").exists()


@pytest.mark.parametrize("extra, message", [
    ("rate = [100]\nconn_rate = [10]\n", "either rate"),
    ("rate = [100]\nclose = true\n", "closed loop"),
    ("requests_per_conn = 5\n", "only meaningful with conn_rate"),
    ('arrival = "poisson"\n', "only meaningful with rate or conn_rate"),
    ('rate = [100]\ngenerator_io = "uring-auto"\n', "netarena-load refuses.*holding completions back"),
    ('generator_io = "kqueue"\n', "generator_io"),
    ("generator_spin_us = 500\n", "generator_spin_us.*--spin-us belongs to the open-loop modes"),
    ("rate = [100]\ngenerator_spin_us = 20000\n", "generator_spin_us"),
])
def test_suite_open_loop_combinations(tmp_path, extra, message):
    path = write_suite(tmp_path / "s.toml", SUITE + extra)
    with pytest.raises(ConfigError, match=message) as err:
        load_suite(path)
    assert err.value.line is not None


@pytest.mark.parametrize("scenario, folder_key", [("static", "static_path"), ("gridfs", "gridfs_path")])
def test_a_random_folder_runs_in_the_closed_loop_or_at_a_rate(tmp_path, scenario, folder_key):
    """Seed 003's file test is siege's closed loop over random files; a rate is the open-loop variant. Either
    way the generator gets the folder's --urls list (sizes per line), picked at random with a fixed seed."""
    from netarena.scenarios import STATIC_SEED, levels_for, load_spec

    static_dir = tmp_path / "static" / "v1"
    (static_dir / "img").mkdir(parents=True)
    for name in ("00000.jpg", "00001.jpg", "00002.jpg"):
        (static_dir / "img" / name).write_bytes(b"xyz")
    text = SUITE.replace('"hello"', f'"{scenario}"') + f'{folder_key} = "img/"\n'
    for extra, rate in (("", None), ("rate = [100]\n", "100")):
        suite, _ = load_suite(write_suite(tmp_path / "s.toml", text + extra))
        (level,) = levels_for(suite.measure[0])
        args = load_spec(scenario, level, 8080, static_dir).args
        urls = Path(args[args.index("--urls") + 1]).read_text().splitlines()
        assert urls[0] == f"/{scenario}/img/00000.jpg 3" and len(urls) == 3, urls
        assert args[args.index("--seed") + 1] == str(STATIC_SEED) and "--url-order" in args
        assert (args[args.index("--rate") + 1] if "--rate" in args else None) == rate, args


def test_open_loop_database_levels_keep_the_generator_sleeping(tmp_path):
    """netarena-load's --spin-us auto may busy-poll a core at high rates; on a 2-core machine the database shares
    the generator's CPU, so open-loop mongo/gridfs levels get the sleeping window (20 µs) unless the suite sets
    generator_spin_us, and every other scenario keeps the generator's own default (no --spin-us)."""
    from netarena.scenarios import SERVICE_LEVEL_SPIN_US, levels_for, load_spec

    static_dir = tmp_path / "static" / "v1"
    (static_dir / "img").mkdir(parents=True)
    (static_dir / "img" / "00000.jpg").write_bytes(b"xyz")

    def spin_args(scenario: str, extra: str) -> list[str]:
        suite, _ = load_suite(write_suite(tmp_path / "s.toml", SUITE.replace('"hello"', f'"{scenario}"') + extra))
        (level,) = levels_for(suite.measure[0])
        args = load_spec(scenario, level, 8080, static_dir).args
        return [args[i + 1] for i, a in enumerate(args) if a == "--spin-us"]

    assert spin_args("mongo", "rate = [100]\n") == [str(SERVICE_LEVEL_SPIN_US)]
    assert spin_args("gridfs", 'gridfs_path = "img/00000.jpg"\nconn_rate = [10]\n') == [str(SERVICE_LEVEL_SPIN_US)]
    assert spin_args("mongo", "rate = [100]\ngenerator_spin_us = 500\n") == ["500"]
    assert spin_args("mongo", "") == []  # the closed loop has no schedule
    assert spin_args("hello", "rate = [100]\n") == []


@pytest.mark.parametrize("entry, field, message", [
    # The objective and the budget are netarena-load's to judge (its messages; "p99<=100" is 100 s to it).
    ('find_max = { slo = "p99<100ms" }', "measure[0].find_max.slo", "write pPERCENTILE<=DURATION"),
    ('find_max = { slo = "p100<=100ms" }', "measure[0].find_max.slo", "between 0 and 100"),
    ('find_max = { slo = "p99<=100ms", max_errors = "5 percent" }', "measure[0].find_max.max_errors",
     "give a percentage like 0.1%"),
    ('find_max = { slo = "p99<=100ms", max_errors = "150%" }', "measure[0].find_max.max_errors",
     "between 0 and 100%"),
    ('find_max = { slo = "p99<=100ms" }\nrate = [100, 200]', "measure[0].rate", "where the search starts"),
    ('find_max = { slo = "p99<=100ms" }\nclose = true', "measure[0].close", "closed loop"),
    ('find_max = { slo = "p99<=100ms", max_error = "1%" }', "measure[0].find_max", "did you mean 'max_errors'"),
])
def test_find_max_entries_are_checked_before_anything_runs(tmp_path, entry, field, message):
    text = SUITE + entry + "\n"
    path = write_suite(tmp_path / "s.toml", text)
    with pytest.raises(ConfigError) as err:
        load_suite(path)
    assert err.value.field == field and message in err.value.render(), err.value.render()
    assert err.value.line == line_of(text, entry.split("\n")[-1].split(" ")[0])


def test_find_max_entry_becomes_a_search_level(tmp_path):
    from netarena.scenarios import load_spec, levels_for

    path = write_suite(tmp_path / "s.toml", SUITE + 'find_max = { slo = "p99.9<=20ms", max_errors = "1%" }\n'
                                                    "conn_rate = [5]\nrequests_per_conn = 10\n")
    suite, _ = load_suite(path)
    [level] = levels_for(suite.measure[0])
    assert level.offered_rate_per_s is None  # a search offers many rates: none is the level's
    args = load_spec("hello", level, 8080, tmp_path).args
    assert args[args.index("--conn-rate") + 1] == "5" and args[args.index("--slo") + 1] == "p99.9<=20ms"
    assert "--find-max" in args and args[args.index("--max-errors") + 1] == "1%"


def test_suite_thresholds_must_be_a_list_of_expressions(tmp_path):
    """Only the shape is checked here; the expressions themselves are netarena-load's to judge (test_own_server)."""
    text = "name = \"t\"\n[[measure]]\nscenario = \"hello\"\nconnections = [1]\nthresholds = \"p99<=5ms\"\n"
    path = write_suite(tmp_path / "s.toml", text)
    with pytest.raises(ConfigError) as err:
        load_suite(path)
    assert f"{path}:5: measure[0].thresholds:" in err.value.render()
    path.write_text(text.replace('"p99<=5ms"', '["p99<=5ms", ""]'))
    with pytest.raises(ConfigError) as err:
        load_suite(path)
    assert "measure[0].thresholds[1]" in err.value.render()
    path.write_text(text.replace('"p99<=5ms"', '["p99<=5ms", "errors<=0.1%"]'))
    assert load_suite(path)[0].measure[0].thresholds == ["p99<=5ms", "errors<=0.1%"]


def test_threads_placeholder_and_table_go_together(tmp_path):
    """{threads} is the pool size of a contestant that declares [threads]; either without the other is an error."""
    used = GOOD.replace('"--port", "{port}"]', '"--port", "{port}", "--threads", "{threads}"]', 1)
    with pytest.raises(ConfigError, match=r"\{threads\} is used but \[threads\] supported is not true"):
        load_manifest(manifest_dir(tmp_path / "a", used))
    declared = GOOD + '\n[threads]\nsupported = true\ndefault = 4\nhow = "a pool of {threads}"\n'
    with pytest.raises(ConfigError, match="neither start.command nor start.env uses"):
        load_manifest(manifest_dir(tmp_path / "b", declared))
    both = used + '\n[threads]\nsupported = true\ndefault = 4\nhow = "a pool of {threads}"\n'
    assert load_manifest(manifest_dir(tmp_path / "c", both)).threads.default == 4


def test_suite_threads_axis_multiplies_the_levels(tmp_path):
    from netarena.scenarios import levels_for

    path = write_suite(tmp_path / "s.toml", 'name = "s"\n[[measure]]\nscenario = "sleep"\nconnections = [1, 2]\n'
                                          'threads = [1, 2]\nsleep_ms = [1000]\n')
    suite, _ = load_suite(path)
    assert [lv.key for lv in levels_for(suite.measure[0])] == [
        "c=1,w=1,threads=1,sleep_ms=1000", "c=2,w=1,threads=1,sleep_ms=1000",
        "c=1,w=1,threads=2,sleep_ms=1000", "c=2,w=1,threads=2,sleep_ms=1000"]
    bad = write_suite(tmp_path / "bad.toml", 'name = "s"\n[[measure]]\nscenario = "sleep"\nconnections = [1]\n'
                                            'threads = [0]\n')
    with pytest.raises(ConfigError, match="threads"):
        load_suite(bad)


def test_entry_contestants_narrow_the_suite_and_a_typo_exits_2(tmp_path, cache_dir):
    """A [[measure]] entry's own contestants/exclude (seed 002: gunicorn sync at 9 workers, the others at 1)."""
    from netarena import contestants as ct
    from netarena.plan.suite import build_plan

    text = SUITE + ('exclude = ["fx-other"]\n\n[[measure]]\nscenario = "hello"\ncontestants = ["fx-other"]\n'
                    'connections = [8]\n')
    suite, _ = load_suite(write_suite(tmp_path / "s.toml", text))
    plan = build_plan(suite, ct.load(FIXTURE_CONTESTANTS, ["fx-good", "fx-other"]))
    assert sorted((i.contestant, i.level.key) for i in plan.items) == [("fx-good", "c=4,w=1"),
                                                                       ("fx-other", "c=8,w=1")]
    typo = write_suite(tmp_path / "typo.toml", text.replace('contestants = ["fx-other"]', 'contestants = ["fx-othre"]'))
    results = tmp_path / "r"
    result = run_cli(["run", typo, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS], cache_dir)
    assert result.returncode == 2, result.stderr
    assert "measure[1].contestants: unknown contestant 'fx-othre'" in result.stderr, result.stderr
    assert not results.exists()


@pytest.mark.parametrize("entry, field, message", [
    ("requests = 0", "measure[0].requests", "greater than or equal to 1"),
    ("requests = 1000\nrate = [100]", "measure[0].requests", "--requests counts a closed loop"),
    ("requests = 1000\nconn_rate = [10]", "measure[0].requests", "--requests counts a closed loop"),
    ('requests = 1000\nfind_max = { slo = "p99<=10ms" }', "measure[0].requests", "--requests counts a closed loop"),
    ("connections_per_step = 100", "measure[0].connections_per_step", "only meaningful with conn_rate"),
    ("connections_per_step = 100\nrate = [100]", "measure[0].connections_per_step", "only meaningful with conn_rate"),
    ("connections_per_step = 0\nconn_rate = [10]", "measure[0].connections_per_step", "greater than or equal to 1"),
    ("connections_per_step = 100\nconn_rate = [10, 30, 40]", "measure[0].conn_rate", "evenly spaced and rising"),
    ("connections_per_step = 100\nconn_rate = [30, 20, 10]", "measure[0].conn_rate", "evenly spaced and rising"),
    ('connections_per_step = 100\nconn_rate = [10, 20]\narrival = "poisson"', "measure[0].connections_per_step",
     "needs --arrival uniform"),
    ('connections_per_step = 100\nconn_rate = [10]\nfind_max = { slo = "p99<=10ms" }',
     "measure[0].connections_per_step", "find_max search's steps"),
])
def test_requests_and_connections_per_step_are_checked(tmp_path, entry, field, message):
    text = SUITE + entry + "\n"
    path = write_suite(tmp_path / "s.toml", text)
    with pytest.raises(ConfigError) as err:
        load_suite(path)
    assert err.value.field == field and message in err.value.render(), err.value.render()
    assert err.value.line is not None


def test_requests_on_echo_is_refused(tmp_path):
    path = write_suite(tmp_path / "s.toml", SUITE.replace('"hello"', '"echo"') + "requests = 10\n")
    with pytest.raises(ConfigError, match="echo_bytes") as err:
        load_suite(path)
    assert err.value.field == "measure[0].requests"


def test_requests_level_passes_n_and_keeps_the_duration_as_limit(tmp_path):
    from netarena.generator import generator_argv
    from netarena.scenarios import levels_for, load_spec

    suite, _ = load_suite(write_suite(tmp_path / "s.toml", SUITE + "requests = 5000\n"))
    [level] = levels_for(suite.measure[0])
    assert level.requests == 5000 and level.key == "c=4,w=1,n=5000"
    args = load_spec("hello", level, 8080, tmp_path).args
    assert args[args.index("-n") + 1] == "5000"
    argv = generator_argv(Path("netarena-load"), "http", "http://127.0.0.1:8080/hello", args, warmup_s=1,
                          duration_s=30, timeout_s=5, cpus=[1])
    assert argv[argv.index("--duration") + 1] == "30"


def test_connections_per_step_makes_one_sweep_level(tmp_path, generator_binary):
    from netarena.backends.base import generator_time_limit_s
    from netarena.generator import generator_argv
    from netarena.scenarios import levels_for, load_spec

    suite, _ = load_suite(write_suite(tmp_path / "s.toml", SUITE + "conn_rate = [50, 100, 150]\n"
                                      "requests_per_conn = 10\nconnections_per_step = 300\n"))
    [level] = levels_for(suite.measure[0])
    assert level.param("conn_rate_steps") == "50:150:50" and level.param("conns_per_step") == 300
    assert level.offered_rate_per_s is None  # a sweep offers many rates: none is the level's
    args = load_spec("hello", level, 8080, tmp_path).args
    assert args[args.index("--steps") + 1] == "50:150:50" and args[args.index("--conns-per-step") + 1] == "300"
    assert args[args.index("--requests-per-conn") + 1] == "10"
    argv = generator_argv(generator_binary, "http", "http://127.0.0.1:8080/hello", args, warmup_s=0,
                          duration_s=3, timeout_s=5, cpus=[1])
    assert "--duration" not in argv and "--step-duration" not in argv
    # Each step's connections at its rate (6 + 3 + 2 s), each with a drain of up to timeout_s, and the grace:
    # netarena-load's own account of the sweep (check's longest_s).
    assert generator_time_limit_s(argv, 0, 3, 5) == pytest.approx(11 + 3 * 5 + 30)


def test_the_generator_time_limit_is_netarena_loads_own_account(generator_binary):
    from netarena.backends.base import GENERATOR_GRACE_S, generator_time_limit_s
    from netarena.generator import generator_argv

    def limit(args, warmup_s=1, duration_s=3, timeout_s=5, mode="http", target="http://127.0.0.1:9/"):
        argv = generator_argv(generator_binary, mode, target, args, warmup_s=warmup_s, duration_s=duration_s,
                              timeout_s=timeout_s, cpus=[])
        return generator_time_limit_s(argv, warmup_s, duration_s, timeout_s) - GENERATOR_GRACE_S

    assert limit(["-c", "4"]) == pytest.approx(1 + 3 + 5)  # warm-up, the measured phase, its drain
    # A find-max search may measure up to 40 steps (netarena-load's FIND_MAX_MAX_STEPS), each with its drain.
    assert limit(["--rate", "100", "--find-max", "--slo", "p99<=5ms"]) == pytest.approx(1 + 40 * (3 + 5))
    # A fixed-size echo flood is not bounded by time: the measurement's own duration bounds it.
    assert limit(["--bytes", "1m"], mode="echo", target="127.0.0.1:9") == pytest.approx(1 + 3 + 5)


def test_generator_threads_above_the_generator_cpus_are_capped_and_said(tmp_path):
    from netarena.contestants import load
    from netarena.plan.suite import build_plan

    suite, _ = load_suite(write_suite(tmp_path / "s.toml", SUITE.replace("[4]", "[8]") + "generator_threads = 4\n"))
    contestants = load(FIXTURE_CONTESTANTS, ["fx-good"])
    plan = build_plan(suite, contestants, None, None, [1, 2])
    [item] = plan.items
    assert item.level.generator_threads == 2 and item.level.generator_threads_asked == 4
    assert item.level.to_dict()["generator_threads_asked"] == 4  # stored with every measurement
    assert "t=2" in item.level.key and "capped to 2" in plan.notices[0]
    uncapped = build_plan(suite, contestants, None, None, [1, 2, 3, 4])
    assert uncapped.items[0].level.generator_threads == 4 and not uncapped.notices


def test_cli_bad_requests_entry_exits_2(tmp_path, cache_dir):
    path = write_suite(tmp_path / "bad.toml", SUITE + "requests = 100\nrate = [10]\n")
    results = tmp_path / "results"
    result = run_cli(["run", path, "--results", results, "--contestants-dir", FIXTURE_CONTESTANTS], cache_dir)
    assert result.returncode == 2, result.stderr
    assert "measure[0].requests" in result.stderr and "closed loop" in result.stderr
    assert not results.exists()


def test_echo_may_run_on_io_uring_but_has_no_coalescing_window(tmp_path):
    from netarena.scenarios import load_spec, levels_for

    echo = SUITE.replace('scenario = "hello"', 'scenario = "echo"')
    path = write_suite(tmp_path / "s.toml", echo + 'generator_io = "uring"\n')
    suite, _ = load_suite(path)
    [level] = levels_for(suite.measure[0])
    args = load_spec("echo", level, 8080, tmp_path).args
    assert args[args.index("--io") + 1] == "uring" and "--coalesce-us" not in args
    path = write_suite(tmp_path / "t.toml", echo + 'generator_io = "uring-auto"\n')
    with pytest.raises(ConfigError, match="the echo flood reacts to every completion at once") as err:
        load_suite(path)
    assert err.value.field == "measure[0].generator_io"


@pytest.mark.parametrize("settings, field, message", [
    ('precision = "3"', "precision", "not a percentage"),
    ('precision = "abc"', "precision", "not a percentage"),
    ('precision = "0%"', "precision", "outside 0%–100%"),
    ('precision = "100%"', "precision", "outside 0%–100%"),
    ('precision = "3%"\nrepeat_max = 2', "repeat", "at least 3"),  # repeat = 1 from SUITE: too few for a minimum
    ("repeat_max = 10", "repeat_max", "give precision too"),
    ("precision_budget_s = 60", "precision_budget_s", "give precision too"),
])
def test_suite_precision_settings(tmp_path, settings, field, message):
    text = SUITE.replace("repeat = 1\n", f"repeat = 1\n{settings}\n")
    path = write_suite(tmp_path / "s.toml", text)
    with pytest.raises(ConfigError) as err:
        load_suite(path)
    assert message in err.value.render() and err.value.field == field, err.value.render()
    assert err.value.line == line_of(text, field)


def test_suite_precision_is_a_minimum_and_a_budget(tmp_path):
    from netarena.precision import settings

    suite, _ = load_suite(write_suite(tmp_path / "s.toml", SUITE.replace(
        "repeat = 1\n", 'repeat = 4\nprecision = "2.5%"\nrepeat_max = 12\nprecision_budget_s = 600\n')))
    assert settings(suite) == (0.025, 12, 600)
    suite, _ = load_suite(write_suite(tmp_path / "t.toml", SUITE.replace("repeat = 1\n", 'repeat = 3\nprecision = "5%"\n')))
    assert settings(suite) == (0.05, 20, None)  # the default repeat budget
    assert settings(load_suite(write_suite(tmp_path / "u.toml", SUITE))[0]) is None


def test_cli_bad_precision_values(tmp_path, cache_dir):
    path = write_suite(tmp_path / "s.toml", SUITE)
    common = ["--results", tmp_path / "r", "--contestants-dir", FIXTURE_CONTESTANTS, "--backend", "mock"]
    for value, needle in (("3", "not a percentage"), ("abc", "not a percentage"), ("0%", "outside 0%–100%")):
        result = run_cli(["run", path, *common, "--precision", value], cache_dir)
        assert result.returncode == 2, (value, result.stderr)
        assert "--precision" in result.stderr and needle in result.stderr, (value, result.stderr)
        assert "e.g. \"3%\"" in result.stderr
    # --precision with --repeat 2: the minimum must be at least 3
    result = run_cli(["run", path, *common, "--precision", "3%", "--repeat", "2"], cache_dir)
    assert result.returncode == 2 and "at least 3" in result.stderr, result.stderr
    assert not (tmp_path / "r").exists()


def test_profile_table_tool_unsupported_and_env(tmp_path):
    """[profile]: a tool or why not; `env` replaces the runtime's variables for the profiled server only
    (profile.ENV_BY_RUNTIME), and without a tool the runtime's default profiler stays."""
    from netarena.profile import ENV_BY_RUNTIME, ProfilePlan, plan_for

    path = manifest_dir(tmp_path, GOOD)
    for table, message in [('tool = "perf"\nunsupported = "no"', "not both"),
                           ('unsupported = "no"\nenv = { A = "1" }', "env is for a profiled server"),
                           ("", "give tool"), ('env = { "1A" = "x" }', "env")]:
        path.write_text(GOOD + f"\n[profile]\n{table}\n")
        with pytest.raises(ConfigError) as err:
            load_manifest(path)
        assert message in err.value.render() and err.value.field.startswith("profile"), err.value.render()
    path.write_text(GOOD.replace('runtime = "cpython"', 'runtime = "jvm"').replace('language = "python"',
                                                                                  'language = "java"'))
    plan = plan_for(load_manifest(path))
    assert plan.tool == "perf" and plan.env == ENV_BY_RUNTIME["jvm"] == {
        "JAVA_TOOL_OPTIONS": "-XX:+PreserveFramePointer -XX:-UseDynamicNumberOfCompilerThreads"}
    path.write_text(path.read_text() + '\n[profile]\nenv = { JAVA_TOOL_OPTIONS = "-XX:+PreserveFramePointer -Xss2m", '
                                       'EXTRA = "1" }\n')
    plan = plan_for(load_manifest(path))
    assert plan.tool == "perf" and plan.env == {"JAVA_TOOL_OPTIONS": "-XX:+PreserveFramePointer -Xss2m", "EXTRA": "1"}
    path.write_text(GOOD + '\n[profile]\ntool = "perf"\n')
    assert plan_for(load_manifest(path)) == ProfilePlan("perf")  # CPython: no environment of its own


def test_a_database_scenario_needs_the_pool_stated_and_given(tmp_path):
    """Claiming a PostgreSQL scenario asks for [database] (the pool, stated in the report); the pool reaches the
    server as {db_pool}, and a pool set but never given is refused too."""
    good = (FIXTURE_CONTESTANTS / "fx-pg" / "contestant.toml").read_text()
    path = manifest_dir(tmp_path, good, name="fx-pg")
    manifest = load_manifest(path)
    assert manifest.database.pool == 4 and manifest.database.pipelining is False
    no_table = good[:good.index("[database]")] + good[good.index("[install]"):]
    path.write_text(no_table.replace(', "--pg-pool", "{db_pool}"', ""))
    with pytest.raises(ConfigError, match="db, queries, fortunes, updates, cached-queries query PostgreSQL: the "
                                          "manifest must say its connection pool"):
        load_manifest(path)
    path.write_text(no_table)
    with pytest.raises(ConfigError, match=r"\{db_pool\} is used but the manifest has no \[database\] table"):
        load_manifest(path)
    path.write_text(good.replace(', "--pg-pool", "{db_pool}"', ""))
    with pytest.raises(ConfigError, match=r"\[database\] pool is set but neither start.command nor start.env uses"):
        load_manifest(path)
