"""The data a backing service holds while it is measured (docs/scenarios.md, "mongo").

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

MONGO_DB = "netarena"
MONGO_COLLECTION = "docs"
FIXTURE_SEED = 2
BIG_DOC_PEOPLE = 6
BIG_DOC_TARGET_BYTES = 10_000

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
