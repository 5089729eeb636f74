"""Tornado's documented multi-process mode, shared by server.py and echo.py: bind first, then fork."""
import signal
import sys

import tornado.netutil
import tornado.process


def bind_and_fork(port, workers):
    """Return the listening sockets; with workers > 1 this returns only in the forked children."""
    sockets = tornado.netutil.bind_sockets(port, address="127.0.0.1", backlog=2048)
    if workers > 1:
        # fork_processes' parent only supervises: it returns only in the children and exits 0 once every child
        # exited 0. So it ignores the stop signal (which reaches the whole process group) and waits for them,
        # rather than exiting first and leaving them orphaned.
        signal.signal(signal.SIGTERM, lambda *_: None)
        tornado.process.fork_processes(workers)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    return sockets
