"""TechEmpower's database scenarios (db, queries, fortunes, updates, cached-queries; docs/techempower.md): what
every Python contestant's implementation shares. Drivers, pools and templates stay in each contestant.

The database's address comes from NETARENA_POSTGRESQL_URL (the manifests set it from {postgresql_url}; empty
when the measured scenario uses no database) and the pool size per server process from NETARENA_DB_POOL
({db_pool}, the manifest's [database] pool).
"""
import email.utils
import html
import os
import random

POSTGRESQL_URL_VAR = "NETARENA_POSTGRESQL_URL"
DB_POOL_VAR = "NETARENA_DB_POOL"
WORLD_ROWS = 10000
MAX_QUERIES = 500
EXTRA_FORTUNE = "Additional fortune added at request time."
# The fortunes page's template, for the engines that read Jinja2 syntax (Jinja2 itself, Flask's, Starlette's
# Jinja2Templates): one file so every one renders the same page.
TEMPLATES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


def postgresql_url():
    """The database's URL, or None when the server was started for a scenario that uses no database."""
    return os.environ.get(POSTGRESQL_URL_VAR) or None


def pool_size():
    value = os.environ.get(DB_POOL_VAR, "")
    if not value.isdigit() or int(value) < 1:
        raise RuntimeError(f"{DB_POOL_VAR}={value!r}: set it from the manifest's {{db_pool}} (a count >= 1)")
    return int(value)


def queries_count(raw):
    """TechEmpower's clamp of ?queries= / ?count=: missing or not a number is 1, then 1..500."""
    try:
        n = int(raw)
    except (TypeError, ValueError):
        return 1
    return min(max(n, 1), MAX_QUERIES)


def random_id():
    return random.randint(1, WORLD_ROWS)


def random_ids(n):
    return [random_id() for _ in range(n)]


def sorted_fortunes(rows):
    """The fortune table's (id, message) rows plus the one added at request time, sorted by message."""
    rows = list(rows)
    rows.append((0, EXTRA_FORTUNE))
    rows.sort(key=lambda row: row[1])
    return rows


def updated_last(rows):
    """(randomNumber, id) pairs for a batched UPDATE, in id order so concurrent requests lock rows in the same
    order (no deadlock); an id drawn twice keeps its last number, which is also the one the answer shows last."""
    last = {row["id"]: row["randomNumber"] for row in rows}
    return [(number, id_) for id_, number in sorted(last.items())]


def server_date_headers(server):
    """The Server and Date headers TechEmpower requires, for the servers that send neither (uWSGI) or no Server
    (gevent.pywsgi): the Date formatted per response."""
    return [("Server", server), ("Date", email.utils.formatdate(usegmt=True))]


def fortunes_page(rows):
    """The fortunes page for the servers with no template engine of their own (aiohttp, the raw asyncio
    protocol): the page of templates/fortunes.html built by hand, every message escaped by html.escape."""
    cells = "".join(f"<tr><td>{id_}</td><td>{html.escape(message)}</td></tr>" for id_, message in rows)
    return ("<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
            f"<tr><th>id</th><th>message</th></tr>{cells}</table></body></html>")
