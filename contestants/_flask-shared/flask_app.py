"""The Flask app shared by the flask-* contestants (gunicorn + gevent, uwsgi threads, uwsgi + gevent).

Written as a plain synchronous Flask app, the way Flask users write one; the server decides whether
time.sleep blocks a thread (uwsgi threads) or yields to other greenlets (gevent, monkey-patched by
gunicorn's gevent worker or by uwsgi --gevent-early-monkey-patch). The static folder comes from the
environment (the manifests set it from {static_dir}) because WSGI servers import the app by name.
"""
import email.utils
import os
import threading
import time

from flask import Flask, Response, abort, jsonify, render_template, request
# The fixture collection through this process's own MongoClient (one connection pool per worker process,
# pymongo's default maxPoolSize of 100), made on first use after the server forked its workers, under a lock:
# uWSGI's threads ask for it at once on the first requests (contestants/_python-shared, on PYTHONPATH).
from netarena_shared.mongo import sync_docs_collection as mongo_collection
from netarena_shared import world

STATIC_DIR_VAR = "NETARENA_STATIC_DIR"
BYTES_SIZES = (40, 10000, 524288)
# Built once at import: the catalog measures serving a body, not building it.
BYTES_BODIES = {n: b"*" * n for n in BYTES_SIZES}


def create_app(static_dir):
    if not os.path.isdir(static_dir):
        raise RuntimeError(f"{STATIC_DIR_VAR}={static_dir!r} is not a directory; set it to the generated static file set")
    # Flask's own static route (send_from_directory) serves /static/<path>.
    # The fortunes template is the one the Jinja2 contestants share; Flask autoescapes .html templates.
    app = Flask(__name__, static_folder=os.path.abspath(static_dir), static_url_path="/static",
                template_folder=world.TEMPLATES_DIR)

    @app.get("/hello")
    def hello():
        return Response("Hello, World!", mimetype="text/plain")

    @app.get("/bytes/<int:n>")
    def bytes_body(n):
        body = BYTES_BODIES.get(n)
        if body is None:
            abort(404)
        return Response(body, mimetype="application/octet-stream")

    @app.get("/json")
    def json_message():
        return jsonify(message="Hello, World!")

    @app.get("/mongo/<name>")
    def mongo(name):
        # One query per request, by _id; the document as the database returned it, through Flask's jsonify.
        doc = mongo_collection().find_one({"_id": name})
        if doc is None:
            abort(404)
        return jsonify(doc)

    @app.get("/sleep/<int:ms>")
    def sleep(ms):
        time.sleep(ms / 1000)
        return Response(f"slept {ms}", mimetype="text/plain")

    if world.postgresql_url():  # empty when the measured scenario uses no database
        add_database_routes(app)
    return app


def add_database_routes(app):
    """TechEmpower's database routes on psycopg 3 with psycopg_pool: one ConnectionPool per worker process,
    opened on its first request (a pool's threads and connections must not cross a fork), a request holding
    one connection while it queries; each World row its own query, updates one executemany. cached-queries
    reads a copy of World made here, as the app loads, from cachedworld (World's rows again, the table
    TechEmpower's implementations fill their cache from): gunicorn --preload loads the app before it listens,
    so no request of a verification ever sees that read; uWSGI binds its port before it loads the app, so a
    request can wait in the listen queue while the read runs, and reading cachedworld keeps the read out of the
    counts of the queries on world (the manifests of the uWSGI contestants say what that leaves out). psycopg
    is imported only here, after a gevent worker has monkey-patched (its wait function is chosen as it is
    imported)."""
    import psycopg
    from psycopg_pool import ConnectionPool

    size = world.pool_size()
    with psycopg.connect(world.postgresql_url()) as conn:
        cache = dict(conn.execute("SELECT id, randomnumber FROM cachedworld"))
    pools = {}  # pid -> this worker process's pool
    lock = threading.Lock()

    def connection():
        """A connection of this process's pool, held for one request's queries."""
        with lock:
            pool = pools.get(os.getpid())
            if pool is None:
                pool = pools[os.getpid()] = ConnectionPool(world.postgresql_url(), min_size=size, max_size=size,
                                                           kwargs={"autocommit": True}, open=True)
        return pool.connection()

    def read_worlds(conn, n):
        return [{"id": i, "randomNumber": conn.execute("SELECT id, randomnumber FROM world WHERE id = %s",
                                                       (i,)).fetchone()[1]} for i in world.random_ids(n)]

    @app.get("/db")
    def db():
        with connection() as conn:
            return jsonify(read_worlds(conn, 1)[0])

    @app.get("/queries")
    def queries():
        with connection() as conn:
            return jsonify(read_worlds(conn, world.queries_count(request.args.get("queries"))))

    @app.get("/updates")
    def updates():
        with connection() as conn:
            rows = read_worlds(conn, world.queries_count(request.args.get("queries")))
            for row in rows:
                row["randomNumber"] = world.random_id()
            with conn.cursor() as cur:
                cur.executemany("UPDATE world SET randomnumber = %s WHERE id = %s", world.updated_last(rows))
        return jsonify(rows)

    @app.get("/cached-queries")
    def cached_queries():
        ids = world.random_ids(world.queries_count(request.args.get("count")))
        return jsonify([{"id": i, "randomNumber": cache[i]} for i in ids])

    @app.get("/fortunes")
    def fortunes():
        with connection() as conn:
            rows = conn.execute("SELECT id, message FROM fortune").fetchall()
        return render_template("fortunes.html", fortunes=world.sorted_fortunes(rows))

    if under_uwsgi():
        database_endpoints = {"db", "queries", "updates", "cached_queries", "fortunes"}

        @app.after_request
        def techempower_headers(response):
            """The Server and Date headers TechEmpower requires: gunicorn sends both itself, uWSGI neither (and
            this build has no internal routing to add a Date per response). Set on these routes only, so the
            other scenarios' answers stay as uWSGI makes them."""
            if request.endpoint in database_endpoints:
                response.headers["Server"] = "uWSGI"
                response.headers["Date"] = email.utils.formatdate(usegmt=True)
            return response


def under_uwsgi():
    """True in a uWSGI worker: uWSGI embeds the Python interpreter and offers its `uwsgi` module to it only."""
    try:
        import uwsgi  # noqa: F401
    except ImportError:
        return False
    return True


if STATIC_DIR_VAR not in os.environ:
    raise RuntimeError(f"{STATIC_DIR_VAR} is not set; set it to the folder of the generated static file set")
app = create_app(os.environ[STATIC_DIR_VAR])
