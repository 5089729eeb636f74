"""The mongo and gridfs scenarios' data: PyMongo's asyncio client for the event-loop contestants (Tornado,
aiohttp, uvloop), its synchronous client for those that call the database from threads or greenlets (Twisted's
thread pool, eventlet's tpool, gevent under monkey-patching).

pymongo.AsyncMongoClient (PyMongo >= 4.9, the successor of Motor), one per worker process, created on first
use inside that process's running event loop: a client must not cross a fork, and binds to its loop. The
address comes from NETARENA_MONGO_URL, which the manifests set from {mongo_url}; its path names the database.
"""
import os
import threading

MONGO_URL_VAR = "NETARENA_MONGO_URL"
GRIDFS_BUCKET = "fs"  # the bucket the orchestrator loads (netarena.fixtures.GRIDFS_BUCKET)
_databases = {}  # (client kind, pid) -> the fixture database through this process's client of that kind
_lock = threading.Lock()  # the synchronous client is asked for from several threads at once


def _database(kind):
    key = (kind, os.getpid())
    with _lock:
        database = _databases.get(key)
        if database is None:
            import pymongo

            url = os.environ.get(MONGO_URL_VAR)
            if not url:
                raise RuntimeError(f"{MONGO_URL_VAR} is not set; the manifest sets it from {{mongo_url}}")
            for stale in [k for k in _databases if k[1] != key[1]]:  # inherited across a fork: not ours
                del _databases[stale]
            database = _databases[key] = getattr(pymongo, kind)(url).get_default_database()
        return database


def docs_collection():
    """The collection through PyMongo's asyncio client (AsyncMongoClient), for the event-loop contestants."""
    return _database("AsyncMongoClient")["docs"]


def sync_docs_collection():
    """The same collection through pymongo's synchronous MongoClient, one per worker process: thread-safe with
    its own connection pool, for servers that query from threads (Twisted's deferToThread) or greenlets."""
    return _database("MongoClient")["docs"]


def sync_gridfs_bucket():
    """The GridFS bucket through the synchronous client (gridfs.GridFSBucket, pymongo's own GridFS API)."""
    import gridfs

    return gridfs.GridFSBucket(_database("MongoClient"), bucket_name=GRIDFS_BUCKET)
