"""The Flask app shared by the flask-* contestants (gunicorn + gevent, uwsgi threads, uwsgi + gevent).

Written as a plain synchronous Flask app, the way Flask users write one; the server decides whether
time.sleep blocks a thread (uwsgi threads) or yields to other greenlets (gevent, monkey-patched by
gunicorn's gevent worker or by uwsgi --gevent-early-monkey-patch). The static folder comes from the
environment (the manifests set it from {static_dir}) because WSGI servers import the app by name.
"""
import os
import time

from flask import Flask, Response, abort, jsonify
# The fixture collection through this process's own MongoClient (one connection pool per worker process,
# pymongo's default maxPoolSize of 100), made on first use after the server forked its workers, under a lock:
# uWSGI's threads ask for it at once on the first requests (contestants/_python-shared, on PYTHONPATH).
from netarena_shared.mongo import sync_docs_collection as mongo_collection

STATIC_DIR_VAR = "NETARENA_STATIC_DIR"
BYTES_SIZES = (40, 10000, 524288)
# Built once at import: the catalog measures serving a body, not building it.
BYTES_BODIES = {n: b"*" * n for n in BYTES_SIZES}


def create_app(static_dir):
    if not os.path.isdir(static_dir):
        raise RuntimeError(f"{STATIC_DIR_VAR}={static_dir!r} is not a directory; set it to the generated static file set")
    # Flask's own static route (send_from_directory) serves /static/<path>.
    app = Flask(__name__, static_folder=os.path.abspath(static_dir), static_url_path="/static")

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

    return app


if STATIC_DIR_VAR not in os.environ:
    raise RuntimeError(f"{STATIC_DIR_VAR} is not set; set it to the folder of the generated static file set")
app = create_app(os.environ[STATIC_DIR_VAR])
