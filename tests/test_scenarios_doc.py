"""docs/scenarios.md is the catalog's single source of truth: every value it states must be the one the
verification code (netarena.scenarios, netarena.config) uses, so the two cannot drift apart."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from netarena import scenarios as sc
from netarena.config import BYTES_SIZES, SCENARIOS

DOC = (Path(__file__).resolve().parents[1] / "docs" / "scenarios.md").read_text()


def _row(scenario: str) -> str:
    match = re.search(rf"^\| `{scenario}` \|(.*)$", DOC, re.MULTILINE)
    assert match, f"docs/scenarios.md has no table row for `{scenario}`"
    return match.group(1)


def test_every_scenario_has_a_row_and_no_other():
    rows = re.findall(r"^\| `([a-z-]+)` \|", DOC, re.MULTILINE)
    assert rows == list(SCENARIOS)


def test_hello_row_matches_the_code():
    row = _row("hello")
    assert "`GET /hello`" in row
    assert f"`Content-Type: {sc.HELLO_CONTENT_TYPE}`" in row
    assert f"body `{sc.HELLO_BODY.decode()}` ({len(sc.HELLO_BODY)} bytes)" in row


def test_bytes_row_matches_the_code():
    row = _row("bytes")
    sizes = re.search(r"`n` is one of ([\d, ]+)", row)
    assert sizes, row
    assert tuple(int(n) for n in sizes.group(1).replace(" ", "").strip(",").split(",")) == BYTES_SIZES
    fill = re.search(r"every byte `(.)` \(0x([0-9A-Fa-f]{2})\)", row)
    assert fill and fill.group(1).encode() == sc.BYTES_FILL == bytes([int(fill.group(2), 16)])


def test_json_row_matches_the_code():
    row = _row("json")
    assert f"`Content-Type: {sc.JSON_CONTENT_TYPE}`" in row
    body = re.search(r"parses to `(\{.*?\})`", row)
    assert body and json.loads(body.group(1)) == sc.JSON_BODY


def test_sleep_row_matches_the_code():
    row = _row("sleep")
    assert "`GET /sleep/{ms}`" in row and f"body `{sc.SLEEP_BODY}`" in row


def test_static_set_paragraph_matches_the_code():
    count = re.search(r"`img/00000\.jpg` … `img/(\d+)\.jpg`: ([\d,]+) files", DOC)
    assert count and int(count.group(1)) + 1 == int(count.group(2).replace(",", "")) == sc.STATIC_FILE_COUNT
    assert f"median {sc.STATIC_MEDIAN_BYTES // 1024} KiB" in DOC and sc.STATIC_MEDIAN_BYTES % 1024 == 0
    assert f"σ = {sc.STATIC_SIGMA:g}" in DOC
    clip = re.search(r"clipped to\s+(\d+) KiB … (\d+) MiB", DOC)
    assert clip and (int(clip.group(1)) * 1024, int(clip.group(2)) * 1024 * 1024) == \
        (sc.STATIC_MIN_BYTES, sc.STATIC_MAX_BYTES)
    assert f"`random.Random({sc.STATIC_SEED})`" in DOC
    assert f"`random.Random({sc.STATIC_SEED} + 1 + i).randbytes(size)`" in DOC
    assert f"`$NETARENA_CACHE/static/v{sc.STATIC_SET_VERSION}`" in DOC
    listed = re.findall(r"`bytes/(\d+)`", DOC)
    assert tuple(int(n) for n in listed) == BYTES_SIZES


@pytest.mark.parametrize("name", ["MIN_LISTEN_BACKLOG", "NAGLE_CHECK_REQUESTS", "NAGLE_CHECK_PATHS",
                                  "NAGLE_MIN_STALL_MS", "SLEEP_OVERLAP_CONNECTIONS", "SLEEP_OVERLAP_MS",
                                  "SLEEP_OVERLAP_MAX_BATCHES"])
def test_constants_the_doc_names_exist(name):
    assert f"`{name}`" in DOC or f"{{{name}}}" in DOC
    assert hasattr(sc, name)


def test_backlog_rule_matches_the_code():
    assert f"listen backlog of at least {sc.MIN_LISTEN_BACKLOG} (`MIN_LISTEN_BACKLOG`)" in DOC
