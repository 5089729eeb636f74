"""Tornado's documented multi-process mode, shared by server.py and echo.py: bind first, then fork."""
import asyncio
import contextlib
import os
import signal
import sys

import tornado.netutil
import tornado.process


def bind_and_fork(host, port, workers):
    """Return the listening sockets; with workers > 1 this returns only in the forked children."""
    sockets = tornado.netutil.bind_sockets(port, address=host, backlog=2048)
    if workers > 1:
        # fork_processes' parent only supervises: it returns only in the children and exits 0 once every child
        # exited 0. So it ignores the stop signal (which reaches the whole process group) and waits for them,
        # rather than exiting first and leaving them orphaned.
        signal.signal(signal.SIGTERM, lambda *_: None)
        try:
            # max_restarts=0: a child that dies on its own is not silently replaced (Tornado's default restarts
            # up to 100 times); like the other pre-fork contestants (prefork.py), the others are stopped and
            # the server exits non-zero so the failure is visible.
            tornado.process.fork_processes(workers, max_restarts=0)
        except RuntimeError as exc:
            print(f"{exc}: a worker exited unexpectedly; stopping the others", file=sys.stderr, flush=True)
            if os.getpgrp() == os.getpid():  # our own process group (netarena starts us as its leader)
                os.killpg(0, signal.SIGTERM)  # this process ignores SIGTERM, the children stop
            sys.exit(1)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # each child stops through serve_until_stopped
    return sockets


def serve_until_stopped(server, sockets, resources=None):
    """Serve on the asyncio loop until SIGTERM. The signal only sets an event; the loop then stops the server
    and asyncio.run cancels what is left, so a stop lands even with busy keep-alive connections (raising
    SystemExit from a plain signal handler in the middle of a callback sometimes did not).

    `resources`, if given, is an async context manager entered in this process's loop before the server
    accepts and left after it stopped (server.py's database pool, which binds to the loop it was opened in)."""
    async def serve():
        async with resources or contextlib.nullcontext():
            server.add_sockets(sockets)
            stop = asyncio.Event()
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
            await stop.wait()
            server.stop()

    asyncio.run(serve())
