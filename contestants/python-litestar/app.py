"""netarena contestant: a Litestar application, imported by name by uvicorn.

Written the way Litestar's docs write one: typed async route handlers whose return values Litestar
serializes (msgspec for the dicts), create_static_files_router for /static. The static folder comes from
the environment (the manifest sets it from {static_dir}) because the ASGI server imports the app by name.
"""
import asyncio
import contextlib
import os
from typing import Any

from litestar import Litestar, MediaType, get
from litestar.datastructures import State
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.exceptions import NotFoundException
from litestar.response import Template
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig

from netarena_shared.bodies import BYTES_BODIES, HELLO
from netarena_shared import pg, world
from netarena_shared.mongo import docs_collection

STATIC_DIR_VAR = "NETARENA_STATIC_DIR"


@get("/hello", media_type=MediaType.TEXT)
async def hello() -> bytes:
    return HELLO


@get("/bytes/{n:int}", media_type="application/octet-stream")
async def bytes_body(n: int) -> bytes:
    body = BYTES_BODIES.get(n)
    if body is None:
        raise NotFoundException("unknown size")
    return body


@get("/json")
async def json_message() -> dict[str, str]:
    return {"message": "Hello, World!"}


@get("/sleep/{ms:int}", media_type=MediaType.TEXT)
async def sleep(ms: int) -> str:
    await asyncio.sleep(ms / 1000)
    return f"slept {ms}"


@get("/mongo/{name:str}")
async def mongo(name: str) -> dict[str, Any]:
    # One query by _id through PyMongo's asyncio client (one per worker process, netarena_shared.mongo).
    doc = await docs_collection().find_one({"_id": name})
    if doc is None:
        raise NotFoundException("no such document")
    return doc


@contextlib.asynccontextmanager
async def postgresql(app):
    """Litestar's lifespan, run by uvicorn in each worker process in its event loop: this process's asyncpg pool
    (netarena_shared.pg) and the World cache filled from it, on app.state, when the server was started for a
    database scenario."""
    if world.postgresql_url() is None:
        yield
        return
    app.state.pool = await pg.open_pool()
    app.state.cache = await pg.read_world_table(app.state.pool)
    try:
        yield
    finally:
        await app.state.pool.close()


# TechEmpower's database routes: the pool and cache the lifespan put on the application's State. ?queries= and
# ?count= are taken as strings: a bad value is TechEmpower's 1, not Litestar's 400.
@get("/db")
async def db(state: State) -> dict[str, int]:
    return await pg.one_world(state.pool)


@get("/queries")
async def queries(state: State, queries: str | None = None) -> list[dict[str, int]]:
    return await pg.some_worlds(state.pool, queries)


@get("/updates")
async def updates(state: State, queries: str | None = None) -> list[dict[str, int]]:
    return await pg.update_worlds(state.pool, queries)


@get("/cached-queries")
async def cached_queries(state: State, count: str | None = None) -> list[dict[str, int]]:
    return pg.cached_worlds(state.cache, count)


@get("/fortunes")
async def fortunes(state: State) -> Template:
    # Litestar's Jinja2 engine (autoescape=True): the messages are escaped by the engine.
    return Template(template_name="fortunes.html", context={"fortunes": await pg.fortunes(state.pool)})


def create_app(static_dir):
    if not os.path.isdir(static_dir):
        raise RuntimeError(f"{STATIC_DIR_VAR}={static_dir!r} is not a directory; set it to the generated static file set")
    # No OpenAPI schema routes: an API server in production has no use for them here.
    return Litestar(
        route_handlers=[hello, bytes_body, json_message, sleep, mongo, db, queries, updates, cached_queries, fortunes,
                        create_static_files_router(path="/static", directories=[static_dir])],
        # The fortunes page's template, the one the Jinja2 contestants share.
        template_config=TemplateConfig(directory=world.TEMPLATES_DIR, engine=JinjaTemplateEngine),
        lifespan=[postgresql],
        openapi_config=None,
    )


if STATIC_DIR_VAR not in os.environ:
    raise RuntimeError(f"{STATIC_DIR_VAR} is not set; set it to the folder of the generated static file set")
app = create_app(os.environ[STATIC_DIR_VAR])
