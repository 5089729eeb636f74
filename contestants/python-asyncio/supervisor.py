"""Run N copies of a server, each in its own process, all bound to one port with SO_REUSEPORT.

The kernel spreads incoming connections over the listening sockets, so the workers share nothing.
The supervisor only forwards the stop signal and exits when every worker has; if one worker dies on
its own, the others are stopped too, so a broken contestant never keeps answering at half strength.
"""

import os
import signal
import subprocess
import sys

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)


def run_workers(worker_argv: list[str], workers: int) -> int:
    remaining: set[subprocess.Popen] = set()
    stopping = False

    def forward(signum, _frame):
        nonlocal stopping
        stopping = True
        # Only os.wait() below reaps, so every pid in `remaining` is still ours (alive or a
        # zombie) and cannot have been reused by another process.
        for child in remaining:
            try:
                os.kill(child.pid, signum)
            except ProcessLookupError:
                pass

    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, forward)
    for _ in range(workers):
        remaining.add(subprocess.Popen(worker_argv))
    if stopping:
        # A stop signal that came while we were spawning missed the later workers.
        forward(signal.SIGTERM, None)

    exit_code = 0
    while remaining:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        child = next((c for c in remaining if c.pid == pid), None)
        if child is None:
            continue
        remaining.discard(child)
        if stopping:
            continue
        # The stop signal goes to the whole process group, so a worker may see it (and end, by
        # its handler or, while still starting, by the default action) before we do.
        code = os.waitstatus_to_exitcode(status)
        if code != 0 and -code not in FORWARDED_SIGNALS:
            print(f"worker {pid} exited on its own with {code}; stopping the others", file=sys.stderr)
            exit_code = 1
        forward(signal.SIGTERM, None)
    return exit_code
