"""The mongo scenario's collection: PyMongo's asyncio client for the event-loop contestants (Tornado, aiohttp,
uvloop), its synchronous client for those that call the database from threads (Twisted's thread pool).

pymongo.AsyncMongoClient (PyMongo >= 4.9, the successor of Motor), one per worker process, created on first
use inside that process's running event loop: a client must not cross a fork, and binds to its loop. The
address comes from NETARENA_MONGO_URL, which the manifests set from {mongo_url}; its path names the database.
"""
import os

MONGO_URL_VAR = "NETARENA_MONGO_URL"
_collections = {}


def docs_collection():
    collection = _collections.get(os.getpid())
    if collection is None:
        from pymongo import AsyncMongoClient

        url = os.environ.get(MONGO_URL_VAR)
        if not url:
            raise RuntimeError(f"{MONGO_URL_VAR} is not set; the manifest sets it from {{mongo_url}}")
        _collections.clear()
        collection = _collections[os.getpid()] = AsyncMongoClient(url).get_default_database()["docs"]
    return collection


_sync_collections = {}


def sync_docs_collection():
    """The same collection through pymongo's synchronous MongoClient, one per worker process: thread-safe with
    its own connection pool, for servers that query from threads (Twisted's deferToThread)."""
    collection = _sync_collections.get(os.getpid())
    if collection is None:
        from pymongo import MongoClient

        url = os.environ.get(MONGO_URL_VAR)
        if not url:
            raise RuntimeError(f"{MONGO_URL_VAR} is not set; the manifest sets it from {{mongo_url}}")
        _sync_collections.clear()
        collection = _sync_collections[os.getpid()] = MongoClient(url).get_default_database()["docs"]
    return collection
