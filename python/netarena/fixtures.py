"""The data a backing service holds while it is measured (docs/scenarios.md, "mongo" and "gridfs"; TechEmpower's
database on PostgreSQL at the end, docs/techempower.md).

Database MONGO_DB, collection MONGO_COLLECTION: two documents with string `_id`s, so every framework
serializes them as plain JSON (no ObjectId to convert):

- "small": seed 002's `{canonicalUrl: "http://foo.com"}`;
- "big": about BIG_DOC_TARGET_BYTES of JSON shaped like seed 002's big document: BIG_DOC_PEOPLE person records
  of about twenty fields each (strings, numbers, booleans, nested objects; no array directly inside an array,
  which FerretDB v1 rejects), generated from Random(FIXTURE_SEED) so every run holds the same bytes.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

MONGO_DB = "netarena"
MONGO_COLLECTION = "docs"
FIXTURE_SEED = 2
BIG_DOC_PEOPLE = 6
BIG_DOC_TARGET_BYTES = 10_000
GRIDFS_BUCKET = "fs"
GRIDFS_CHUNK_BYTES = 255 * 1024
GRIDFS_FOLDER = "img/"
# The bucket's files unless a suite says (gridfs_files): chosen from the curve in docs/scenarios.md.
GRIDFS_DEFAULT_FILES = 100
# Verified byte for byte before each gridfs load (always in the bucket: a suite's gridfs_files is at least 3).
GRIDFS_VERIFY_FILES = ("img/00000.jpg", "img/00001.jpg", "img/00002.jpg")
GRIDFS_MISSING_FILE = "img/missing.jpg"  # never stored: must be a 404

_FIRST = ["Ada", "Brian", "Chen", "Dana", "Emil", "Fatima", "Goran", "Hana", "Ivo", "Jun", "Kai", "Lea"]
_LAST = ["Lovelace", "Kernighan", "Wei", "Scully", "Nilsson", "Haddad", "Petrov", "Sato", "Novak", "Park"]
_CITIES = ["Lisbon", "Osaka", "Tallinn", "Quito", "Accra", "Perth", "Bergen", "Austin", "Pune", "Leeds"]
_WORDS = ("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et "
          "dolore magna aliqua enim ad minim veniam quis nostrud exercitation ullamco laboris nisi").split()


def _person(rng: random.Random, index: int) -> dict:
    first, last = rng.choice(_FIRST), rng.choice(_LAST)
    return {
        "id": index + 1,
        "guid": "%08x-%04x-%04x-%04x-%012x" % tuple(rng.getrandbits(b) for b in (32, 16, 16, 16, 48)),
        "isActive": rng.random() < 0.5,
        "balance": round(rng.uniform(1000, 4000), 2),
        "picture": f"http://placehold.it/32x32?{index}",
        "age": rng.randint(20, 70),
        "eyeColor": rng.choice(["blue", "brown", "green"]),
        "name": {"first": first, "last": last},
        "company": rng.choice(["ZENTIX", "QUONK", "MEDIOT", "PLASMOX", "ORBALIX"]),
        "email": f"{first.lower()}.{last.lower()}@example.com",
        "phone": "+1 (%03d) %03d-%04d" % (rng.randint(200, 999), rng.randint(200, 999), rng.randint(0, 9999)),
        "address": {"street": f"{rng.randint(1, 999)} {rng.choice(_WORDS).title()} Street",
                    "city": rng.choice(_CITIES), "zip": f"{rng.randint(10000, 99999)}"},
        "about": " ".join(rng.choice(_WORDS) for _ in range(150)) + ".",
        "registered": "20%02d-%02d-%02dT%02d:%02d:%02d" % (rng.randint(14, 24), rng.randint(1, 12),
                                                           rng.randint(1, 28), rng.randint(0, 23),
                                                           rng.randint(0, 59), rng.randint(0, 59)),
        "latitude": round(rng.uniform(-90, 90), 6),
        "longitude": round(rng.uniform(-180, 180), 6),
        "tags": [rng.choice(_WORDS) for _ in range(7)],
        "friends": [{"id": i, "name": f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"} for i in range(3)],
        "greeting": f"Hello, {first}! You have {rng.randint(1, 20)} unread messages.",
        "favoriteFruit": rng.choice(["apple", "banana", "strawberry"]),
    }


def mongo_documents() -> dict[str, dict]:
    """The fixture documents by name (= their `_id`)."""
    rng = random.Random(FIXTURE_SEED)
    return {
        "small": {"_id": "small", "canonicalUrl": "http://foo.com"},
        "big": {"_id": "big", "people": [_person(rng, i) for i in range(BIG_DOC_PEOPLE)]},
    }


def json_size(document: dict) -> int:
    return len(json.dumps(document, separators=(",", ":")).encode())


def load_mongo_fixture(url: str) -> dict:
    """Replace the fixture collection's contents with the documents; returns what was loaded (for the store)."""
    from pymongo import MongoClient

    client = MongoClient(url, serverSelectionTimeoutMS=10_000)
    try:
        collection = client[MONGO_DB][MONGO_COLLECTION]
        collection.drop()
        documents = mongo_documents()
        collection.insert_many(list(documents.values()))
        return {"database": MONGO_DB, "collection": MONGO_COLLECTION,
                "documents": {name: json_size(doc) for name, doc in documents.items()}}
    finally:
        client.close()


def mongo_fixture_intact(url: str) -> str | None:
    """None when the collection holds exactly the fixture; else what differs (checked before each contestant)."""
    from pymongo import MongoClient

    client = MongoClient(url, serverSelectionTimeoutMS=5_000)
    try:
        found = {doc["_id"]: doc for doc in client[MONGO_DB][MONGO_COLLECTION].find()}
    finally:
        client.close()
    expected = mongo_documents()
    if found != expected:
        return f"collection {MONGO_DB}.{MONGO_COLLECTION} holds {sorted(found)} (or changed contents), " \
               f"expected exactly {sorted(expected)}"
    return None


def gridfs_file_names(count: int) -> list[str]:
    """The names the gridfs fixture stores: the static set's img/ files, the first `count` of them."""
    return [f"{GRIDFS_FOLDER}{index:05d}.jpg" for index in range(count)]


def load_gridfs_fixture(url: str, static_dir: Path, count: int, progress=lambda done, total: None) -> dict:
    """Replace the GridFS bucket's contents with the first `count` files of the static set's img/ folder;
    returns what was loaded and how long it took (for the store). progress(done, total) after each file."""
    import gridfs
    from pymongo import MongoClient

    names = gridfs_file_names(count)
    missing = [name for name in names if not (static_dir / name).is_file()]
    if missing:
        raise ValueError(f"the static set at {static_dir} lacks {missing[0]} (gridfs_files = {count} needs "
                         f"img/00000.jpg to img/{count - 1:05d}.jpg)")
    client = MongoClient(url, serverSelectionTimeoutMS=10_000)
    started = time.monotonic()
    try:
        database = client[MONGO_DB]
        database.drop_collection(f"{GRIDFS_BUCKET}.files")
        database.drop_collection(f"{GRIDFS_BUCKET}.chunks")
        bucket = gridfs.GridFSBucket(database, bucket_name=GRIDFS_BUCKET, chunk_size_bytes=GRIDFS_CHUNK_BYTES)
        total_bytes = 0
        for done, name in enumerate(names, 1):
            data = (static_dir / name).read_bytes()
            bucket.upload_from_stream(name, data)
            total_bytes += len(data)
            progress(done, count)
        # GridFS's drivers create this index on their first write; made sure of here, as docs/scenarios.md describes the bucket.
        database[f"{GRIDFS_BUCKET}.chunks"].create_index([("files_id", 1), ("n", 1)], unique=True)
        return {"bucket": GRIDFS_BUCKET, "files": count, "bytes": total_bytes,  # not a scenario: a byte count
                "chunk_bytes": GRIDFS_CHUNK_BYTES, "load_s": round(time.monotonic() - started, 3)}
    finally:
        client.close()


def gridfs_fixture_intact(url: str, static_dir: Path, count: int) -> str | None:
    """None when the bucket holds exactly the fixture's files with the static set's sizes; else what differs."""
    from pymongo import MongoClient

    client = MongoClient(url, serverSelectionTimeoutMS=5_000)
    try:
        found = {doc["filename"]: doc["length"]
                 for doc in client[MONGO_DB][f"{GRIDFS_BUCKET}.files"].find({}, {"filename": 1, "length": 1})}
    finally:
        client.close()
    expected = {name: (static_dir / name).stat().st_size for name in gridfs_file_names(count)}
    if found != expected:
        return f"bucket {MONGO_DB}.{GRIDFS_BUCKET} holds {len(found)} files, expected the {count} of img/ " \
               f"with their sizes"
    return None


# ----------------------------------------------------------------------------- TechEmpower's database

# The postgresql service's TechEmpower database (docs/techempower.md): TechEmpower's schema with lower-case
# unquoted names (table world: id, randomnumber; table fortune: id, message), World's numbers drawn from
# Random(TECHEMPOWER_SEED) so every run holds the same rows (TechEmpower's own script uses SQL random()).
TECHEMPOWER_DB = "hello_world"
TECHEMPOWER_SEED = 35
WORLD_ROWS = 10_000
# TechEmpower's twelve fortunes exactly (toolset/databases/postgres/create-postgres.sql), by id.
FORTUNES = {
    1: "fortune: No such file or directory",
    2: "A computer scientist is someone who fixes things that aren't broken.",
    3: "After enough decimal places, nobody gives a damn.",
    4: "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1",
    5: "A computer program does what you tell it to do, not what you want it to do.",
    6: "Emacs is a nice operating system, but I prefer UNIX. \u2014 Tom Christaensen",
    7: "Any program that runs right is obsolete.",
    8: "A list is only as strong as its weakest link. \u2014 Donald Knuth",
    9: "Feature: A bug with seniority.",
    10: "Computers make very fast, very accurate mistakes.",
    11: '<script>alert("This should not be displayed in a browser alert box.");</script>',
    12: "\u30d5\u30ec\u30fc\u30e0\u30ef\u30fc\u30af\u306e\u30d9\u30f3\u30c1\u30de\u30fc\u30af",
}


def world_rows() -> list[tuple[int, int]]:
    """The fixture's World: (id, randomnumber) for id 1..WORLD_ROWS, randomnumber in 1..WORLD_ROWS."""
    rng = random.Random(TECHEMPOWER_SEED)
    return [(i, rng.randint(1, WORLD_ROWS)) for i in range(1, WORLD_ROWS + 1)]


def database_url(url: str, database: str) -> str:
    """`url` (postgres://user@host:port/db?options) with its database replaced."""
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(url)._replace(path=f"/{database}"))


def load_techempower_fixture(url: str) -> dict:
    """(Re)create database TECHEMPOWER_DB on the PostgreSQL server at `url` (any of its databases) with
    World, Fortune, CachedWorld (World's rows again, the table TechEmpower's cached-queries implementations fill
    their cache from) and pg_stat_statements; returns what was loaded (for the store)."""
    import psycopg

    started = time.monotonic()
    with psycopg.connect(database_url(url, "postgres"), autocommit=True, connect_timeout=10) as admin:
        # WITH (FORCE): a contestant's pooled connections left open must not keep the old copy alive.
        admin.execute(f"DROP DATABASE IF EXISTS {TECHEMPOWER_DB} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {TECHEMPOWER_DB} ENCODING 'UTF8' TEMPLATE template0")
    with psycopg.connect(database_url(url, TECHEMPOWER_DB), autocommit=True, connect_timeout=10) as conn:
        conn.execute("CREATE EXTENSION pg_stat_statements")
        conn.execute("CREATE TABLE world (id integer NOT NULL PRIMARY KEY, randomnumber integer NOT NULL DEFAULT 0)")
        conn.execute("CREATE TABLE fortune (id integer NOT NULL PRIMARY KEY, message varchar(2048) NOT NULL)")
        conn.execute("CREATE TABLE cachedworld (id integer NOT NULL PRIMARY KEY, "
                     "randomnumber integer NOT NULL DEFAULT 0)")
        with conn.cursor() as cur:
            for table in ("world", "cachedworld"):
                with cur.copy(f"COPY {table} (id, randomnumber) FROM STDIN") as copy:
                    for row in world_rows():
                        copy.write_row(row)
            cur.executemany("INSERT INTO fortune (id, message) VALUES (%s, %s)", list(FORTUNES.items()))
        for table in ("world", "fortune", "cachedworld"):
            conn.execute(f"ANALYZE {table}")
    return {"database": TECHEMPOWER_DB, "world_rows": WORLD_ROWS, "cachedworld_rows": WORLD_ROWS,
            "fortune_rows": len(FORTUNES),
            "seed": TECHEMPOWER_SEED, "load_s": round(time.monotonic() - started, 3)}


def techempower_fixture_intact(url: str) -> str | None:
    """None when TECHEMPOWER_DB holds exactly the fixture's rows; else what differs (checked before each
    measurement: an updates run writes World)."""
    import psycopg

    try:
        with psycopg.connect(database_url(url, TECHEMPOWER_DB), connect_timeout=5) as conn:
            world = conn.execute("SELECT id, randomnumber FROM world ORDER BY id").fetchall()
            cached_world = conn.execute("SELECT id, randomnumber FROM cachedworld ORDER BY id").fetchall()
            fortunes = dict(conn.execute("SELECT id, message FROM fortune").fetchall())
            statements = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'").fetchall()
    except psycopg.Error as exc:
        return f"database {TECHEMPOWER_DB} not readable: {type(exc).__name__}: {str(exc).strip()[:200]}"
    if not statements:
        return "extension pg_stat_statements missing"
    if fortunes != FORTUNES:
        return f"table fortune holds {len(fortunes)} rows or changed messages, expected TechEmpower's {len(FORTUNES)}"
    expected = world_rows()
    if world != expected:
        changed = sum(1 for a, b in zip(world, expected) if a != b) + abs(len(world) - len(expected))
        return f"table world differs from the fixture in {changed} of {WORLD_ROWS} rows"
    if cached_world != expected:
        return f"table cachedworld holds {len(cached_world)} rows or changed numbers, expected World's {WORLD_ROWS}"
    return None
