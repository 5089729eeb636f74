"""The parts of runs across hosts that need no lab: merging generator documents exactly (by the real
netarena-load merge, on the mock backend's complete documents), splitting a level over hosts, the cluster
file's checks, the certificates, and how the backend sees which workers are connected (against a plain
local Dask cluster on loopback). The lab tests (test_cluster_lab.py) run it all."""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import jsonschema
import pytest
from hdrh.histogram import HdrHistogram

from conftest import FIXTURE_CONTESTANTS, REPO, generator_percentile, run_cli
from netarena.backends.base import MeasureRequest
from netarena.backends.mock import MockBackend
from netarena.backends.cluster import merge_documents, share_level, split_evenly
from netarena.spread import MergeFailed
from netarena.cluster.certs import make_certs
from netarena.cluster.spec import load_cluster
from netarena.config import load_manifest
from netarena.contestants import Contestant
from netarena.errors import ConfigError
from netarena.scenarios import Level


def _document(connections: int, repeat_index: int, scenario: str = "hello") -> dict:
    contestant = Contestant(load_manifest(FIXTURE_CONTESTANTS / "fx-good" / "contestant.toml"),
                            FIXTURE_CONTESTANTS / "fx-good")
    req = MeasureRequest(contestant, scenario, Level(connections=connections), repeat_index, 0, 2.0, 5, [0], [1],
                         Path("/nonexistent"), Path("/nonexistent"))
    return MockBackend().measure(req)["generator"]


def test_mock_documents_are_complete_generator_documents():
    """One definition of the document: the mock's validates against netarena-load's schema."""
    schema = json.loads((REPO / "docs" / "schema" / "netarena-load.schema.json").read_text())
    for scenario in ("hello", "echo"):
        jsonschema.validate(_document(10, 0, scenario), schema)


def test_merge_sums_counts_and_merges_histograms_exactly(generator_binary):
    a, b = _document(10, 0), _document(40, 2)
    merged = merge_documents([{"host": "g1", "document": a}, {"host": "g2", "document": b}], generator_binary)
    assert merged["totals"]["requests"] == a["totals"]["requests"] + b["totals"]["requests"]
    assert merged["throughput"]["requests_per_s"] == a["throughput"]["requests_per_s"] + b["throughput"]["requests_per_s"]
    assert merged["config"]["connections"] == 50
    # The merged percentiles are those of one histogram holding every host's values, not averages.
    expected = HdrHistogram(1, 3_600_000_000, 3)
    for doc in (a, b):
        expected.decode_and_add(doc["latency"]["histogram"]["data"])
    assert merged["latency"]["count"] == expected.get_total_count() == a["latency"]["count"] + b["latency"]["count"]
    assert merged["latency"]["p99_us"] == generator_percentile(expected, 99)
    assert merged["latency"]["p50_us"] == generator_percentile(expected, 50)
    assert [h["host"] for h in merged["hosts"]] == ["g1", "g2"]
    assert merged["hosts"][1]["document"] is b


def test_one_saturated_host_flags_the_measurement(generator_binary):
    a, b = _document(10, 0), _document(10, 1)
    b["generator"]["saturated"] = True
    merged = merge_documents([{"host": "g1", "document": a}, {"host": "g2", "document": b}], generator_binary)
    assert merged["generator"]["saturated"] and merged["generator_saturated"]
    assert [h["saturated"] for h in merged["hosts"]] == [False, True]


def test_documents_the_generator_cannot_merge_are_a_merge_failure(generator_binary):
    a, b = _document(10, 0), _document(10, 0, "echo")
    with pytest.raises(MergeFailed, match="mode echo"):
        merge_documents([{"host": "g1", "document": a}, {"host": "g2", "document": b}], generator_binary)


def test_connections_and_rate_split_over_hosts():
    level = Level(connections=10, params=(("rate", 1000.0),))
    shares = [share_level(level, 3, i) for i in range(3)]
    assert [s.connections for s in shares] == [4, 3, 3]
    assert sum(s.param("rate") for s in shares) == pytest.approx(1000.0)
    assert [split_evenly(2, 3, i) for i in range(3)] == [1, 1, 0]


def _cluster_file(tmp_path: Path, body: str) -> Path:
    make_certs(tmp_path / "certs")
    path = tmp_path / "cluster.toml"
    path.write_text('scheduler = "tls://198.18.0.1:8786"\n[tls]\nca = "certs/ca.pem"\ncert = "certs/client.pem"\n'
                    'key = "certs/client.key"\n' + body)
    return path


def test_cluster_file_checks(tmp_path):
    good = _cluster_file(tmp_path, '[server]\nworker = "s"\naddress = "198.18.0.11"\n[generators]\nworkers = ["g"]\n')
    spec, base = load_cluster(good)
    assert spec.server.worker == "s" and base == tmp_path
    same = _cluster_file(tmp_path / "b", '[server]\nworker = "s"\naddress = "x"\n[generators]\nworkers = ["s"]\n')
    with pytest.raises(ConfigError, match="both the server host and a generator host"):
        load_cluster(same)
    (tmp_path / "certs" / "client.key").unlink()
    with pytest.raises(ConfigError, match="tls.key"):
        load_cluster(good)


def test_certs_are_signed_by_their_ca_and_not_overwritten(tmp_path):
    make_certs(tmp_path)
    context = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    context.load_cert_chain(tmp_path / "worker.pem", tmp_path / "worker.key")
    assert oct((tmp_path / "ca.key").stat().st_mode & 0o777) == "0o600"
    with pytest.raises(FileExistsError, match="--force"):
        make_certs(tmp_path)


def test_cli_bad_cluster_file_is_exit_2_and_starts_nothing(tmp_path):
    cache = tmp_path / "cache"
    out = run_cli(["run", "--cluster", tmp_path / "missing.toml", "--results", tmp_path / "r"], cache)
    assert out.returncode == 2 and "cluster file not found" in out.stderr
    assert not (tmp_path / "r" / "netarena.sqlite").exists()
    out = run_cli(["cluster", "certs", tmp_path / "c"], cache)
    assert out.returncode == 0, out.stderr
    out = run_cli(["cluster", "certs", tmp_path / "c"], cache)
    assert out.returncode == 2 and "--force" in out.stderr


def test_the_workers_seen_are_never_the_clients_cached_summary():
    """ClusterBackend.workers() decides that a host left mid-measurement. Dask's Client refreshes a cached
    scheduler summary every few seconds *without* per-worker entries; Client.scheduler_info() returns that
    shared cache, so a refresh landing between its own fetch and its return made every worker look gone (a
    real run stopped with "server host h1 left the cluster" while h1 was working). Here the refresh runs
    every millisecond against a real scheduler with two real worker processes on loopback."""
    import dask
    from distributed import Client, LocalCluster

    from netarena.backends.cluster import ClusterBackend

    with dask.config.set({"distributed.client.scheduler-info-interval": "1ms"}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                         dashboard_address=None) as cluster, \
            Client(cluster, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=60)
        backend = ClusterBackend(spec=None, base=None)
        backend.client = client
        seen = [len(backend.workers()) for _ in range(400)]
        assert seen == [2] * 400, f"{seen.count(2)} of 400 looks saw both workers: {sorted(set(seen))}"


def test_merged_figures_are_the_parts_figures_to_the_bit(generator_binary):
    """The merged maximum of a figure is one of the parts' figures exactly, as a reader comparing the two sees it.
    0.21834659983215737 is a value CI met that a JSON parser without exact float reading takes one unit in the
    last place off; the others are spread over [0, 1)."""
    values = [0.21834659983215737] + [(i * 0.6180339887498949) % 1 for i in range(1, 20)]
    for value in values:
        a, b = _document(10, 0), _document(40, 2)
        a["generator"]["run_delay_fraction_max"] = value
        b["generator"]["run_delay_fraction_max"] = value / 3
        merged = merge_documents([{"host": "g1", "document": a}, {"host": "g2", "document": b}], generator_binary)
        assert merged["generator"]["run_delay_fraction_max"] == value, (repr(value), merged["generator"])
