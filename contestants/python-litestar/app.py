"""netarena contestant: a Litestar application, imported by name by uvicorn.

Written the way Litestar's docs write one: typed async route handlers whose return values Litestar
serializes (msgspec for the dicts), create_static_files_router for /static. The static folder comes from
the environment (the manifest sets it from {static_dir}) because the ASGI server imports the app by name.
"""
import asyncio
import os
from typing import Any

from litestar import Litestar, MediaType, get
from litestar.exceptions import NotFoundException
from litestar.static_files import create_static_files_router

from netarena_shared.bodies import BYTES_BODIES, HELLO
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


def create_app(static_dir):
    if not os.path.isdir(static_dir):
        raise RuntimeError(f"{STATIC_DIR_VAR}={static_dir!r} is not a directory; set it to the generated static file set")
    # No OpenAPI schema routes: an API server in production has no use for them here.
    return Litestar(
        route_handlers=[hello, bytes_body, json_message, sleep, mongo,
                        create_static_files_router(path="/static", directories=[static_dir])],
        openapi_config=None,
    )


if STATIC_DIR_VAR not in os.environ:
    raise RuntimeError(f"{STATIC_DIR_VAR} is not set; set it to the folder of the generated static file set")
app = create_app(os.environ[STATIC_DIR_VAR])
