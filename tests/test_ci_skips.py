"""Under CI a skipped test fails the run; outside CI it stays a skip, listed with its reason (-rs)."""

from __future__ import annotations

from conftest import TESTS

SKIPPING = """
import pytest

def test_runs():
    pass

def test_skips():
    pytest.skip("needs a thing this machine lacks")

@pytest.mark.skipif(True, reason="marked away")
def test_marked():
    pass

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_expected_failure():
    assert False
"""


def _session(pytester, monkeypatch, ci: str | None):
    pytester.makeconftest((TESTS / "conftest.py").read_text())
    pytester.makepyfile(test_some=SKIPPING)
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    return pytester.runpytest_subprocess("-rs")


def test_skips_fail_under_ci(pytester, monkeypatch):
    result = _session(pytester, monkeypatch, "true")
    # A skip in the test fails it; a skip mark (decided at set-up) makes its set-up an error. An expected
    # failure is not a skip: it keeps its own outcome.
    result.assert_outcomes(passed=1, failed=1, errors=1, xfailed=1)
    result.stdout.fnmatch_lines(["*skipped under CI, where every test must run: *marked away*",
                                 "*skipped under CI, where every test must run: *needs a thing this machine lacks*"])
    assert result.ret != 0


def test_skips_stay_skips_and_are_listed_outside_ci(pytester, monkeypatch):
    result = _session(pytester, monkeypatch, None)
    result.assert_outcomes(passed=1, skipped=2, xfailed=1)
    result.stdout.fnmatch_lines(["SKIPPED *needs a thing this machine lacks*", "SKIPPED *marked away*"])
    assert result.ret == 0
