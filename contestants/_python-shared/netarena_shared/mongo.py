"""The mongo scenario's collection: PyMongo's asyncio client for the event-loop contestants (Tornado, aiohttp,
uvloop), its synchronous client for those that call the database from threads (Twisted's thread pool).

pymongo.AsyncMongoClient (PyMongo >= 4.9, the successor of Motor), one per worker process, created on first
use inside that process's running event loop: a client must not cross a fork, and binds to its loop. The
address comes from NETARENA_MONGO_URL, which the manifests set from {mongo_url}; its path names the database.
"""
import os
import threading

MONGO_URL_VAR = "NETARENA_MONGO_URL"
_collections = {}  # (client kind, pid) -> the docs collection of this process's client of that kind
_lock = threading.Lock()  # the synchronous client is asked for from several threads at once


def _collection(kind):
    key = (kind, os.getpid())
    with _lock:
        collection = _collections.get(key)
        if collection is None:
            import pymongo

            url = os.environ.get(MONGO_URL_VAR)
            if not url:
                raise RuntimeError(f"{MONGO_URL_VAR} is not set; the manifest sets it from {{mongo_url}}")
            for stale in [k for k in _collections if k[1] != key[1]]:  # inherited across a fork: not ours
                del _collections[stale]
            collection = _collections[key] = getattr(pymongo, kind)(url).get_default_database()["docs"]
        return collection


def docs_collection():
    """The collection through PyMongo's asyncio client (AsyncMongoClient), for the event-loop contestants."""
    return _collection("AsyncMongoClient")


def sync_docs_collection():
    """The same collection through pymongo's synchronous MongoClient, one per worker process: thread-safe with
    its own connection pool, for servers that query from threads (Twisted's deferToThread)."""
    return _collection("MongoClient")
