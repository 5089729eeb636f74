"""Network namespaces: entering one (the orchestrator enters the lab's control namespace), and the one a host's
installs run in when its own has no route to the registries (the lab's hosts).

setns() moves the calling thread only; the processes and threads it starts afterwards inherit its namespace.
"""

from __future__ import annotations

import ctypes
import os
import threading

from . import ClusterError

_CLONE_NEWNET = 0x40000000

# A path naming the network namespace this host's installs (contestants, services) run in, when its own cannot
# reach the registries. The lab sets it for its workers to the machine's own namespace, held open for them
# (`netarena lab up`, docs/many-machines.md); unset, installs run where the worker runs.
INSTALL_NETNS_ENV = "NETARENA_INSTALL_NETNS"


def enter(path: str, what: str, missing: str = "") -> None:
    """Move the calling thread into the network namespace at `path` (a /var/run/netns entry, a /proc/.../ns/net
    link, or a descriptor's /proc/self/fd entry); ClusterError naming `what` when it cannot, with `missing`
    added when there is no such namespace."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise ClusterError(f"{what} not found ({exc}){missing}") from None
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            raise ClusterError(f"cannot enter {what}: {os.strerror(ctypes.get_errno())} (entering one needs root)")
    finally:
        os.close(fd)


def in_install_netns(fn, *args, **kwargs):
    """fn(*args, **kwargs), in the namespace INSTALL_NETNS_ENV names when it is set: in a thread of its own
    that ends with it, so the caller's thread (a worker's, which goes on to start servers and generators) never
    leaves the host's namespace. Its result, or its exception, is the caller's."""
    path = os.environ.get(INSTALL_NETNS_ENV)
    if not path:
        return fn(*args, **kwargs)
    outcome: dict = {}

    def run() -> None:
        try:
            enter(path, f"the install network namespace {path} ({INSTALL_NETNS_ENV})")
            outcome["result"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller's thread below
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="install-netns")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]
