"""The static file set (seed 003's product images, docs/scenarios.md): generated once into the cache, read by the
scenarios with `static_set = True` and by contestants that declare serves_from_static_set."""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
from pathlib import Path

BYTES_FILL = b"*"
# The bytes scenario's sizes: the static set holds a bytes/{n} file of each (nginx serves /bytes/{n} from them).
BYTES_SIZES = (40, 10000, 524288)

# The static file set (seed 003's product images). Changing any of these changes every file, so the
# cache folder name carries STATIC_SET_VERSION.
STATIC_SET_VERSION = 1
STATIC_SEED = 3
STATIC_FILE_COUNT = 10_000
STATIC_MEDIAN_BYTES = 24 * 1024
STATIC_SIGMA = 0.8  # log-normal shape; with the median above the mean file is about 33 KiB
STATIC_MIN_BYTES = 1024
STATIC_MAX_BYTES = 1024 * 1024


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------------------- static file set


def static_file_sizes(count: int = STATIC_FILE_COUNT, seed: int = STATIC_SEED) -> list[int]:
    rng = random.Random(seed)
    mu = math.log(STATIC_MEDIAN_BYTES)
    return [min(STATIC_MAX_BYTES, max(STATIC_MIN_BYTES, int(round(math.exp(rng.gauss(mu, STATIC_SIGMA))))))
            for _ in range(count)]


def build_static_files(dest: Path, count: int = STATIC_FILE_COUNT, seed: int = STATIC_SEED) -> Path:
    """Generate the static file set into dest (idempotent: a complete set is reused as it is).

    Sizes come first from Random(seed), then the contents of file i are Random(seed + 1 + i) bytes, so
    any one file can be regenerated (and checked) without producing the others.
    """
    marker = dest / ".netarena-static-complete"
    stamp = json.dumps({"version": STATIC_SET_VERSION, "count": count, "seed": seed})
    if marker.is_file() and marker.read_text() == stamp:
        return dest
    tmp = dest.with_name(dest.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "img").mkdir(parents=True)
    (tmp / "bytes").mkdir()
    for index, size in enumerate(static_file_sizes(count, seed)):
        (tmp / "img" / f"{index:05d}.jpg").write_bytes(static_file_bytes(index, size, seed))
    for size in BYTES_SIZES:
        (tmp / "bytes" / str(size)).write_bytes(BYTES_FILL * size)
    (tmp / ".netarena-static-complete").write_text(stamp)
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)
    return dest


def url_list(static_dir: Path, folder: str, route: str = "static", count: int | None = None) -> Path:
    """A --urls file naming the files of one folder of the static set under /{route}/ (static: from the file
    system; gridfs: the same files out of the database), the first `count` of them (None: all), each line with
    its file's size for the generator to check (beside the set, never inside it)."""
    files = sorted(p for p in (static_dir / folder).iterdir() if p.is_file())[:count]
    if not files:
        raise ValueError(f"no files in {static_dir / folder}")
    tail = "" if count is None else f"-{count}"
    out = static_dir.parent / f"urls-{static_dir.name}-{route}-{folder.strip('/').replace('/', '_')}{tail}.txt"
    text = "".join(f"/{route}/{folder}{p.name} {p.stat().st_size}\n" for p in files)
    if not out.is_file() or out.read_text() != text:
        tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, out)
    return out


def static_file_bytes(index: int, size: int, seed: int = STATIC_SEED) -> bytes:
    return random.Random(seed + 1 + index).randbytes(size)


def static_set_ready(dest: Path) -> bool:
    return (dest / ".netarena-static-complete").is_file()

