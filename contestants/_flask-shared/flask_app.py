"""The Flask app shared by the flask-* contestants (gunicorn + gevent, uwsgi threads, uwsgi + gevent).

Written as a plain synchronous Flask app, the way Flask users write one; the server decides whether
time.sleep blocks a thread (uwsgi threads) or yields to other greenlets (gevent, monkey-patched by
gunicorn's gevent worker or by uwsgi --gevent-early-monkey-patch). The static folder comes from the
environment (the manifests set it from {static_dir}) because WSGI servers import the app by name.
"""
import os
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
    """TechEmpower's database routes on psycopg 3 with psycopg_pool (netarena_shared.psycopg_world): one
    ConnectionPool per worker process, opened on its first request, a request holding one connection while it
    queries; each World row its own query, updates one executemany. cached-queries reads a copy of World made
    here, as the app loads: gunicorn --preload loads the app before it listens; uWSGI and gunicorn's gevent workers
    load it after the port is bound, and a request may then wait on that read (netarena counts a read of the whole
    table as a cache fill, not as the request's query). psycopg is imported only here: after a gevent worker's monkey patching, and never by
    the flask-* contestants that lack it."""
    from netarena_shared import psycopg_world as pw
    from netarena_shared.pg import cached_worlds

    cache = pw.read_world_cache()
    pool = pw.ProcessPool()

    @app.get("/db")
    def db():
        with pool.connection() as conn:
            return jsonify(pw.read_worlds(conn, 1)[0])

    @app.get("/queries")
    def queries():
        with pool.connection() as conn:
            return jsonify(pw.some_worlds(conn, request.args.get("queries")))

    @app.get("/updates")
    def updates():
        with pool.connection() as conn:
            return jsonify(pw.update_worlds(conn, request.args.get("queries")))

    @app.get("/cached-queries")
    def cached_queries():
        return jsonify(cached_worlds(cache, request.args.get("count")))

    @app.get("/fortunes")
    def fortunes():
        with pool.connection() as conn:
            rows = pw.fortunes(conn)
        return render_template("fortunes.html", fortunes=rows)

    if under_uwsgi():
        database_endpoints = {"db", "queries", "updates", "cached_queries", "fortunes"}

        @app.after_request
        def techempower_headers(response):
            """The Server and Date headers TechEmpower requires: gunicorn sends both itself, uWSGI neither (and
            this build has no internal routing to add a Date per response). Set on these routes only, so the
            other scenarios' answers stay as uWSGI makes them."""
            if request.endpoint in database_endpoints:
                for name, value in world.server_date_headers("uWSGI"):
                    response.headers[name] = value
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
