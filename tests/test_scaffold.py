"""`netarena new`: every language's template, written as it is, passes `netarena verify` for every scenario its
server implements; bad input exits 2 and writes nothing.

Verification installs and starts the new contestant for real (go build, cargo, javac, erlc, ...). It runs in
the environment's own NETARENA_CACHE (as test_contestants_verify.py does), so the static file set is
generated once and shared. A language whose runtime cannot be had here is skipped with the reason
`netarena list` gives; under CI (CI=true) that is a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, run_cli
from netarena.scaffold import TEMPLATES

VERIFY_TIMEOUT_S = 900  # a first cargo or javac build on a busy machine


def netarena(*args, timeout=120):
    # The contestants are written under pytest's tmp folder (mode 700), out of reach of the unprivileged user
    # servers run as by default under root: run them as root here (test_edges covers the default).
    return subprocess.run([sys.executable, "-m", "netarena", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, NETARENA_RUN_AS_ROOT="1"))


@pytest.mark.parametrize("language", list(TEMPLATES))
def test_new_contestant_passes_verify_as_written(language, tmp_path):
    contestants = tmp_path / "contestants"
    name = f"scaffold-{language}"
    scenarios = TEMPLATES[language]
    made = netarena("new", name, "--language", language, "--scenarios", ",".join(scenarios),
                    "--contestants-dir", contestants)
    assert made.returncode == 0, made.stdout + made.stderr
    assert f"netarena verify {name} --contestants-dir {contestants}" in made.stdout
    listed = netarena("list", "--json", "--contestants-dir", contestants)
    row = json.loads(listed.stdout)["contestants"][0]
    assert [s for s, reason in row["scenarios"].items() if reason is None] == list(scenarios)
    if not row["runnable"]:
        reason = "; ".join(row["reasons"])
        if os.environ.get("CI"):
            pytest.fail(f"the {language} template cannot run on the CI machine: {reason}")
        pytest.skip(f"the {language} template cannot run here: {reason}")
    result = netarena("verify", name, "--contestants-dir", contestants, timeout=VERIFY_TIMEOUT_S)
    assert result.returncode == 0, f"{result.stdout[-6000:]}\n{result.stderr[-3000:]}"
    passed = [line for line in result.stdout.splitlines() if line.count("│") >= 4 and "│ pass " in line]
    assert len(passed) == len(scenarios), result.stdout
    assert "needed SIGKILL" not in result.stdout, result.stdout


REFUSED = [
    (["My_Server", "--language", "go"], "not a contestant name"),
    (["ok-name", "--language", "pyton"], "did you mean 'python'"),
    (["ok-name", "--language", "rust", "--scenarios", "static"], "does not implement static"),
    (["ok-name", "--language", "go", "--scenarios", "helo"], "did you mean 'hello'"),
    (["ok-name", "--language", "go", "--scenarios", "hello,hello"], "listed twice"),
    (["existing", "--language", "python"], "already exists"),
]


@pytest.mark.parametrize("args, message", REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_bad_input_exits_2_and_writes_nothing(args, message, tmp_path, cache_dir):
    contestants = tmp_path / "contestants"
    (contestants / "existing").mkdir(parents=True)
    result = run_cli(["new", *args, "--contestants-dir", contestants], cache_dir)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr and result.stderr.count("error:") == 1, result.stderr
    assert sorted(p.name for p in contestants.iterdir()) == ["existing"]
    assert not any((contestants / "existing").iterdir())
