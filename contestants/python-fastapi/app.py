"""netarena contestant: a FastAPI application, imported by name by the ASGI server that serves it.

Written the way FastAPI's tutorial writes one: path operations returning a dict (FastAPI serializes it with
its JSON response), a Response with a media type for fixed bodies, StaticFiles mounted at /static, async
path operations throughout so nothing runs in the thread pool. python-fastapi serves it with uvicorn,
python-granian with Granian. The static folder comes from the environment (the manifests set it from
{static_dir}) because ASGI servers import the app by name.
"""
import asyncio
import contextlib
import os

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.responses import PlainTextResponse
from fastapi.staticfiles import StaticFiles

from netarena_shared.bodies import BYTES_BODIES, HELLO
from netarena_shared import pg, world
from netarena_shared.mongo import docs_collection

STATIC_DIR_VAR = "NETARENA_STATIC_DIR"


@contextlib.asynccontextmanager
async def lifespan(app):
    """FastAPI's lifespan (run by the ASGI server in each worker process, in its event loop): this process's
    asyncpg pool, the World cache filled from it and the fortunes template, when the server was started for a
    database scenario. asyncpg and Jinja2 are imported only then."""
    if world.postgresql_url() is None:
        yield
        return
    from fastapi.templating import Jinja2Templates

    app.state.pool = await pg.open_pool()
    app.state.cache = await pg.read_world_table(app.state.pool)
    # Starlette's Jinja2Templates turns on Jinja2's autoescaping: the messages are escaped by the engine.
    app.state.templates = Jinja2Templates(directory=world.TEMPLATES_DIR)
    yield
    await app.state.pool.close()


def create_app(static_dir):
    if not os.path.isdir(static_dir):
        raise RuntimeError(f"{STATIC_DIR_VAR}={static_dir!r} is not a directory; set it to the generated static file set")
    # No /docs, /redoc or /openapi.json: an API server in production has no use for the interactive docs here.
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)

    @app.get("/hello", response_class=PlainTextResponse)
    async def hello():
        return PlainTextResponse(HELLO)

    @app.get("/bytes/{n}")
    async def bytes_body(n: int):
        body = BYTES_BODIES.get(n)
        if body is None:
            raise HTTPException(status_code=404, detail="unknown size")
        return Response(body, media_type="application/octet-stream")

    @app.get("/json")
    async def json_message():
        return {"message": "Hello, World!"}

    @app.get("/sleep/{ms}", response_class=PlainTextResponse)
    async def sleep(ms: int):
        await asyncio.sleep(ms / 1000)
        return PlainTextResponse(f"slept {ms}")

    @app.get("/mongo/{name}")
    async def mongo(name: str):
        # One query by _id through PyMongo's asyncio client (one per worker process, netarena_shared.mongo);
        # the dict goes out through FastAPI's own JSON serialization.
        doc = await docs_collection().find_one({"_id": name})
        if doc is None:
            raise HTTPException(status_code=404, detail="no such document")
        return doc

    # TechEmpower's database routes: the pool, cache and templates the lifespan put on app.state.
    # ?queries= and ?count= are read as strings: a bad value is TechEmpower's 1, not FastAPI's 422.
    @app.get("/db")
    async def db(request: Request):
        return await pg.one_world(request.app.state.pool)

    @app.get("/queries")
    async def queries(request: Request, queries: str | None = None):
        return await pg.some_worlds(request.app.state.pool, queries)

    @app.get("/updates")
    async def updates(request: Request, queries: str | None = None):
        return await pg.update_worlds(request.app.state.pool, queries)

    @app.get("/cached-queries")
    async def cached_queries(request: Request, count: str | None = None):
        return pg.cached_worlds(request.app.state.cache, count)

    @app.get("/fortunes")
    async def fortunes(request: Request):
        return request.app.state.templates.TemplateResponse(
            request, "fortunes.html", {"fortunes": await pg.fortunes(request.app.state.pool)})

    # Starlette's StaticFiles (FastAPI re-exports it): a FileResponse per file, read in chunks by uvicorn, sent
    # by the server itself where it offers the ASGI pathsend extension (Granian).
    app.mount("/static", StaticFiles(directory=static_dir), name="static")
    return app


if STATIC_DIR_VAR not in os.environ:
    raise RuntimeError(f"{STATIC_DIR_VAR} is not set; set it to the folder of the generated static file set")
app = create_app(os.environ[STATIC_DIR_VAR])
