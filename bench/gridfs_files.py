#!/usr/bin/env python3
"""How fast FerretDB serves GridFS files as the bucket grows: the curve behind the gridfs scenario's file count.

FerretDB 1.24 answers every query with a scan of the whole collection (even by `filename` with an index, or
by `files_id` on the chunks), so a read costs in proportion to the bucket's size. The gridfs scenario must
measure the frameworks, not that scan: docs/scenarios.md ("gridfs") takes its default file count from this
curve.

Method
------
* The database as `netarena run` starts it (netarena.services.ServiceManager: FerretDB on PostgreSQL by
  default, `--backend sqlite` for the other handler), pinned to the CPUs given (default: CPU 1, the CPU the
  services share with the generator on two cores).
* For each file count: the bucket loaded with the first N files of the static set (netarena.fixtures, the
  same loader as a run), then `--clients` processes, each with pymongo's synchronous client, reading files
  picked at random (seeded) by name with GridFSBucket.open_download_stream_by_name(...).read() for
  `--duration` seconds: files read per second, MB/s, and the bucket's load time.
* The query plans (explain) of the two queries one read makes are printed for the largest count: a scan
  there is why the rate falls with N.

Needs the project's virtualenv (it imports netarena) and Go to build FerretDB (cached like a run's):
  .venv/bin/python bench/gridfs_files.py                       # 30, 100, 300, 1000 files; 4 clients; 10 s
  .venv/bin/python bench/gridfs_files.py --counts 30,100 --duration 3 --backend sqlite
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from netarena.contestants import cache_root
from netarena.fixtures import GRIDFS_BUCKET, MONGO_DB, gridfs_file_names, load_gridfs_fixture
from netarena.scenarios import STATIC_SET_VERSION, build_static_files
from netarena.services import ServiceManager, load_all


def read_files(url: str, names: list[str], seed: int, duration_s: float, out) -> None:
    import gridfs
    from pymongo import MongoClient

    client = MongoClient(url)
    bucket = gridfs.GridFSBucket(client[MONGO_DB], bucket_name=GRIDFS_BUCKET)
    rng = random.Random(seed)
    reads = bytes_read = 0
    deadline = time.monotonic() + duration_s
    while time.monotonic() < deadline:
        bytes_read += len(bucket.open_download_stream_by_name(rng.choice(names)).read())
        reads += 1
    client.close()
    out.put((reads, bytes_read))


def measure(url: str, count: int, clients: int, duration_s: float) -> dict:
    names = gridfs_file_names(count)
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=read_files, args=(url, names, seed, duration_s, out))
             for seed in range(clients)]
    started = time.monotonic()
    for proc in procs:
        proc.start()
    results = [out.get(timeout=duration_s + 120) for _ in procs]
    for proc in procs:
        proc.join()
    wall = time.monotonic() - started
    reads = sum(r for r, _ in results)
    return {"files": count, "clients": clients, "reads": reads, "reads_per_s": round(reads / wall, 1),
            "mb_per_s": round(sum(b for _, b in results) / wall / 1e6, 2)}


def explain(url: str, count: int) -> dict:
    from pymongo import MongoClient

    client = MongoClient(url)
    database = client[MONGO_DB]
    name = gridfs_file_names(count)[-1]
    files_id = database[f"{GRIDFS_BUCKET}.files"].find_one({"filename": name})["_id"]
    plans = {
        "files by filename": database.command("explain", {"find": f"{GRIDFS_BUCKET}.files",
                                                          "filter": {"filename": name}}),
        "chunks by files_id": database.command("explain", {"find": f"{GRIDFS_BUCKET}.chunks",
                                                           "filter": {"files_id": files_id}, "sort": {"n": 1}}),
    }
    client.close()
    return {what: plan.get("queryPlanner", plan) for what, plan in plans.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--counts", default="30,100,300,1000", help="file counts, comma-separated")
    parser.add_argument("--clients", type=int, default=4, help="reading processes")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of reading per count")
    parser.add_argument("--backend", choices=["postgresql", "sqlite"], default="postgresql")
    parser.add_argument("--cpus", default="1", help="CPUs of the database, comma-separated")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    try:
        counts = sorted({int(c) for c in args.counts.split(",")})
        cpus = [int(c) for c in args.cpus.split(",")]
    except ValueError:
        parser.error("--counts and --cpus take comma-separated integers, e.g. --counts 30,100,300")
    if not counts or min(counts) < 1 or max(counts) > 10_000:
        parser.error("--counts: each between 1 and 10000 (the static set's img/ files)")

    static_dir = build_static_files(cache_root() / "static" / f"v{STATIC_SET_VERSION}")
    work_dir = Path(tempfile.mkdtemp(prefix="netarena-gridfs-bench-"))
    work_dir.chmod(0o711)  # mkdtemp's 0700 would keep out PostgreSQL, which runs as the 'postgres' user
    manager = ServiceManager(load_all(), work_dir, cpus, backends={"mongo": args.backend}, say=print)
    rows, plans = [], {}
    try:
        manager.install("mongo", allow_apt=False)
        url = manager.ensure("mongo").url
        print(f"FerretDB ({args.backend}) at {url}, CPUs {cpus}; {args.clients} clients x {args.duration:g} s")
        print(f"{'files':>6} {'load s':>8} {'reads/s':>9} {'MB/s':>7}")
        for count in counts:
            loaded = load_gridfs_fixture(url, static_dir, count)
            row = dict(measure(url, count, args.clients, args.duration), load_s=loaded["load_s"])
            rows.append(row)
            print(f"{count:>6} {row['load_s']:>8.1f} {row['reads_per_s']:>9.1f} {row['mb_per_s']:>7.2f}", flush=True)
        plans = explain(url, counts[-1])
        print(f"query plans at {counts[-1]} files:")
        print(json.dumps(plans, indent=1, default=str)[:4000])
    finally:
        manager.stop_all()
        shutil.rmtree(work_dir, ignore_errors=True)  # the databases' data: nothing of the bench stays behind
    if args.json_out:
        args.json_out.write_text(json.dumps({"backend": args.backend, "clients": args.clients,
                                             "duration_s": args.duration, "rows": rows, "plans": plans},
                                            indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
