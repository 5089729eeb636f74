"""Pre-fork workers: the parent forks `workers` children that each run `serve()` and only supervises.

How the children share the port is the caller's choice: eventlet and gevent open the listening
socket before forking so every child accepts on it (the oslo.service pattern for eventlet); aiohttp
has each child bind its own socket with SO_REUSEPORT.

Stopping: every process of the group receives the stop signal, and the parent also forwards it in
case it alone was signalled. If a child dies on its own, the parent stops the others and exits
non-zero so the failure is visible instead of a silently smaller server.
"""
import os
import signal
import sys


def run(workers, serve):
    if workers < 1:
        sys.exit(f"--workers must be >= 1, got {workers}")
    if workers == 1:
        serve()
        return
    children = set()
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            exit_code = 1
            try:
                serve()
                exit_code = 0
            except (KeyboardInterrupt, SystemExit):
                exit_code = 0
            finally:
                os._exit(exit_code)
        children.add(pid)

    stopping = False

    def forward(signum, _frame):
        nonlocal stopping
        stopping = True
        for child in children:
            try:
                os.kill(child, signum)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    failed = False
    while children:
        pid, status = os.wait()
        children.discard(pid)
        if not stopping:
            failed = True
            print(f"worker {pid} exited unexpectedly (status {status}); stopping the others", file=sys.stderr)
            forward(signal.SIGTERM, None)
    sys.exit(1 if failed else 0)
