"""netarena contestant: a Sanic application on Sanic's own server (its worker manager, uvloop, httptools).

Started with app.run, Sanic's documented low-level way to run it, rather than the `sanic` command, because
only app.run takes the listen backlog (Sanic's default of 100 is below the catalog's minimum). Sanic spawns
its worker processes, which import this module again: the app is built at import, from the environment (the
manifest sets the static folder from {static_dir}); the command line is read by the main process only.
"""
import asyncio
import os

from sanic import Sanic
from sanic.exceptions import NotFound
from sanic.response import json, raw, text

from netarena_shared.bodies import BYTES_BODIES, HELLO
from netarena_shared.cli import parse_args
from netarena_shared.mongo import docs_collection

STATIC_DIR_VAR = "NETARENA_STATIC_DIR"
# The catalog's minimum is 1024 (docs/scenarios.md); the other contestants ask for 2048.
LISTEN_BACKLOG = 2048

app = Sanic("netarena")
# A stop with /sleep requests in flight ends within the manifest's stop_timeout_s (Sanic waits 15 s by default).
app.config.GRACEFUL_SHUTDOWN_TIMEOUT = 2.0


@app.get("/hello")
async def hello(request):
    return text(HELLO.decode())


@app.get("/bytes/<n:int>")
async def bytes_body(request, n):
    body = BYTES_BODIES.get(n)
    if body is None:
        raise NotFound("unknown size")
    return raw(body, content_type="application/octet-stream")


@app.get("/json")
async def json_message(request):
    return json({"message": "Hello, World!"})


@app.get("/sleep/<ms:int>")
async def sleep(request, ms):
    await asyncio.sleep(ms / 1000)
    return text(f"slept {ms}")


@app.get("/mongo/<name:str>")
async def mongo(request, name):
    # One query by _id through PyMongo's asyncio client, one per worker process (netarena_shared.mongo).
    doc = await docs_collection().find_one({"_id": name})
    if doc is None:
        raise NotFound("no such document")
    return json(doc)


static_dir = os.environ.get(STATIC_DIR_VAR, "")
if not os.path.isdir(static_dir):
    raise RuntimeError(f"{STATIC_DIR_VAR}={static_dir!r} is not a directory; set it to the generated static file set")
# Sanic's static route: files under the folder, streamed by Sanic's file response.
app.static("/static", static_dir)


if __name__ == "__main__":
    args = parse_args(__doc__, static_dir=False)
    app.run(host=args.host, port=args.port, workers=args.workers, backlog=LISTEN_BACKLOG, access_log=False,
            motd=False, single_process=False)
