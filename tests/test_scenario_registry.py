"""Scenarios are plugins: each is one module of python/netarena/scenarios/, found by the registry, and no
other module of netarena decides anything by a scenario's name. A scenario added by a module of its own flows through
the suite's validation and the load's arguments without an edit elsewhere."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from netarena.scenarios import registry

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "netarena"
# Where scenarios may be named: their own modules, and the contestant templates (contestants' handlers).
ALLOWED = (PACKAGE / "scenarios", PACKAGE / "templates")
# A line may compare with a word that is a scenario's name but means something else (the mongo service, the
# generator's echo mode, the json output format): it says so with this comment.
MARKER = "# not a scenario"


def _strings(node: ast.AST) -> list[str]:
    """The string constants of a node that is one, or a tuple/list/set display of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def scenario_names_used(source: str, names: set[str]) -> list[tuple[int, str, str]]:
    """(line, how, name) of every scenario name used in a comparison, a membership test, a dict display's key or
    a match case, except on lines that carry MARKER."""
    lines = source.splitlines()
    found = []

    def add(node: ast.AST, how: str, values: list[str]) -> None:
        for value in values:
            if value in names:
                span = lines[node.lineno - 1:(node.end_lineno or node.lineno)]
                if not any(MARKER in line for line in span):
                    found.append((node.lineno, how, value))

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                add(node, "comparison", _strings(operand))
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                if key is not None:
                    add(key, "dict key", _strings(key))
        elif isinstance(node, ast.MatchValue):
            add(node, "match case", _strings(node.value))
    return found


def test_no_module_outside_the_scenarios_package_decides_by_a_scenario_name():
    names = set(registry.names())
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if any(path.is_relative_to(allowed) for allowed in ALLOWED):
            continue
        for line, how, name in scenario_names_used(path.read_text(), names):
            offenders.append(f"{path.relative_to(PACKAGE.parents[1])}:{line}: {how} with {name!r}")
    assert not offenders, ("ask the scenario registry (netarena.scenarios.registry) instead of naming a scenario; "
                           f"a word that is not a scenario there is marked '{MARKER}':\n" + "\n".join(offenders))


@pytest.mark.parametrize("source", [
    'if scenario == "gridfs":\n    pass\n',
    'ok = "static" in scenarios\n',
    'x = scenario in ("static", "gridfs")\n',
    'only = {"echo": 1}\n',
    'match scenario:\n    case "hello":\n        pass\n',
])
def test_the_scan_finds_a_scenario_name(source):
    assert scenario_names_used(source, set(registry.names()))


def test_the_scan_leaves_marked_lines_and_other_words():
    names = set(registry.names())
    assert not scenario_names_used('if name == "mongo":  # not a scenario: the service\n    pass\n', names)
    assert not scenario_names_used('x = level.param("bytes")\nprint("echo")\n', names)


def test_the_catalog_in_order():
    assert registry.names() == ("echo", "hello", "bytes", "json", "static", "sleep", "mongo", "gridfs", "db", "queries",
                                "fortunes", "updates", "cached-queries")
    for scenario in registry.all():
        assert scenario.doc, f"{scenario.name}: no documentation string"
        assert registry.get(scenario.name) is scenario
    with pytest.raises(KeyError, match="unknown scenario 'nope'"):
        registry.get("nope")
    assert registry.kind("custom").is_http and registry.find("custom") is None


# ----------------------------------------------------------------------------- a scenario from one module


FIXTURE_MODULE = '''
from typing import Annotated

from pydantic import Field

from netarena.scenarios.checks import _expect, ok_status
from netarena.scenarios.load import body_load
from netarena.scenarios.registry import Scenario


class Queries(Scenario):
    """GET /queries/{n}: n rows of the database (a fixture scenario for the registry's test)."""

    name = "queries-test"
    order = 900
    params = {"rows": (list[Annotated[int, Field(ge=1, le=500)]] | None, None)}

    def check_entry(self, entry, fail):
        if entry.rows is not None and len(set(entry.rows)) != len(entry.rows):
            fail("rows", "a count is listed twice")

    def level_params(self, measure):
        return [(("rows", n),) for n in (measure.rows or [1])]

    def load(self, level, base, static_dir, http_args):
        n = level.param("rows", 1)
        return body_load(f"{base}/queries/{n}", http_args, b"row" * n)

    def check_responses(self, http, static_dir):
        http.run("/queries/1", lambda status, headers, body, _: ok_status(status), 3)


SCENARIO = Queries()
'''


CHECKS = '''
import sys
from pathlib import Path

import pytest

from netarena.scenarios import registry
import queries_test_scenario

# Registered before netarena.config is imported, as a module of python/netarena/scenarios/ would be found.
registry.register(queries_test_scenario.SCENARIO)

from netarena import config
from netarena.errors import ConfigError
from netarena.scenarios import levels_for, load_spec

tmp = Path(sys.argv[1])


def suite(entry):
    path = tmp / "suite.toml"
    path.write_text(f'name = "q"\\n\\n[[measure]]\\n{entry}\\n')
    return config.load_suite(path)[0]


assert "queries-test" in config.SCENARIOS and "queries-test" in config.HTTP_SCENARIOS
entry = suite('scenario = "queries-test"\\nconnections = [4]\\nrows = [1, 20]\\nrate = [100]').measure[0]
levels = levels_for(entry)
assert [level.key for level in levels] == ["c=4,w=1,rows=1,rate=100", "c=4,w=1,rows=20,rate=100"], levels
spec = load_spec("queries-test", levels[1], 8080, tmp)
assert spec.mode == "http" and spec.target == "http://127.0.0.1:8080/queries/20", spec
assert spec.args[spec.args.index("--rate") + 1] == "100", spec.args
assert spec.args[spec.args.index("--expect-body-size") + 1] == "60", spec.args
# Its parameter is its own, checked by its module; a catalog scenario's is refused with it, and its with them.
with pytest.raises(ConfigError, match="a count is listed twice"):
    suite('scenario = "queries-test"\\nconnections = [4]\\nrows = [2, 2]')
with pytest.raises(ConfigError, match='only allowed with scenario = "queries-test"'):
    suite('scenario = "hello"\\nconnections = [4]\\nrows = [2]')
with pytest.raises(ConfigError, match='only allowed with scenario = "bytes"'):
    suite('scenario = "queries-test"\\nconnections = [4]\\nsizes = [40]')

# A manifest may claim it, and must give a reason for it when it does not.
folder = tmp / "c1"
folder.mkdir()
others = "".join(f'{s} = "no"\\n' for s in registry.names() if s != "queries-test" and registry.get(s).service is None)
head = ('name = "c1"\\ndisplay_name = "C1"\\nlanguage = "python"\\nruntime = "cpython"\\nframework = "x"\\n'
        'framework_version = "1"\\nconcurrency_model = "event-loop"\\n')
(folder / "contestant.toml").write_text(head + 'scenarios = ["queries-test"]\\n[unsupported]\\n' + others
                                        + '[start]\\ncommand = ["python3", "server.py", "{port}"]\\n')
assert config.load_manifest(folder / "contestant.toml").scenarios == ["queries-test"]
(folder / "contestant.toml").write_text(head + 'scenarios = ["hello"]\\n[unsupported]\\n' + others.replace('hello = "no"\\n', "")
                                        + '[start]\\ncommand = ["python3", "server.py", "{port}"]\\n')
with pytest.raises(ConfigError, match="missing: queries-test"):
    config.load_manifest(folder / "contestant.toml")
print("ok")
'''


def test_a_new_scenario_module_flows_through_validation_and_load_arguments(tmp_path):
    """In a fresh interpreter: a scenario module outside netarena, registered before netarena.config is imported,
    is a suite's and a manifest's scenario with its own parameter and check, and becomes netarena-load arguments."""
    import subprocess
    import sys

    (tmp_path / "queries_test_scenario.py").write_text(FIXTURE_MODULE)
    (tmp_path / "run_checks.py").write_text(CHECKS)
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])}
    result = subprocess.run([sys.executable, str(tmp_path / "run_checks.py"), str(tmp_path)], capture_output=True,
                            text=True, env=env, timeout=60, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stdout + result.stderr


def test_a_suite_field_shared_by_two_scenarios(tmp_path):
    """TechEmpower's queries and updates both take `queries` (one spec object): allowed with either, refused
    with another scenario naming both; a second scenario declaring the name with a spec of its own is refused."""
    from netarena import config
    from netarena.errors import ConfigError

    def suite(scenario):
        path = tmp_path / "suite.toml"
        path.write_text(f'name = "q"\n\n[[measure]]\nscenario = "{scenario}"\nconnections = [4]\nqueries = [1, 20]\n')
        return config.load_suite(path)[0]

    for scenario in ("queries", "updates"):
        assert suite(scenario).measure[0].queries == [1, 20]
    with pytest.raises(ConfigError, match='only allowed with scenario = "queries" or "updates"'):
        suite("db")

    class Other(registry.Scenario):
        """A scenario claiming `queries` with its own spec."""

        name = "other-queries"
        params = {"queries": (list[int] | None, None)}

    registry.register(Other())
    try:
        with pytest.raises(ValueError, match="'queries' is declared by both queries and other-queries"):
            registry.suite_params()
    finally:
        registry.unregister("other-queries")
