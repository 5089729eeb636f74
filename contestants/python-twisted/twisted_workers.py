"""Reactor selection and seed 001's multi-process design, shared by the Twisted HTTP and echo servers.

With several workers, a master opens the listening socket, spawns worker processes that inherit its
file descriptor and adopt it (reactor.adoptStreamPort), and stops accepting on it itself: the kernel
hands each new connection to one of the workers blocked in accept, with no proxy in between.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys

# Twisted's default backlog is 50, which resets bursts of simultaneous connects; the catalog asks >= 1024.
LISTEN_BACKLOG = 4096
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)


def argument_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every address)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--reactor", choices=["default", "asyncio"], default="default",
                        help="default: Twisted's platform reactor (epoll on Linux); asyncio: AsyncioSelectorReactor")
    parser.add_argument("--adopt-fd", type=int, help=argparse.SUPPRESS)
    return parser


def check_args(parser: argparse.ArgumentParser, args) -> None:
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")


def install_reactor(name: str):
    if name == "asyncio":
        from twisted.internet import asyncioreactor
        asyncioreactor.install()
    from twisted.internet import reactor
    return reactor


def log_warnings_to_stderr() -> None:
    # Without an observer Twisted buffers every log event in memory; keep only what needs a human.
    from twisted.logger import (FilteringLogObserver, LogLevel, LogLevelFilterPredicate,
                                globalLogBeginner, textFileLogObserver)
    observer = FilteringLogObserver(textFileLogObserver(sys.stderr),
                                    [LogLevelFilterPredicate(defaultLogLevel=LogLevel.warn)])
    globalLogBeginner.beginLoggingTo([observer], redirectStandardIO=False)


def serve(args, build_factory, worker_argv: list[str]) -> int:
    """Serve build_factory() on args.host:args.port with args.workers processes; returns the exit code.

    The factory is built only after the reactor is chosen: twisted.web's Site imports the global
    reactor, which would otherwise install the default one first."""
    reactor = install_reactor(args.reactor)
    log_warnings_to_stderr()
    factory = build_factory()
    if args.adopt_fd is not None:
        reactor.adoptStreamPort(args.adopt_fd, socket.AF_INET, factory)
        install_stop_handlers(reactor)
        reactor.run()
        return 0
    port = reactor.listenTCP(args.port, factory, backlog=LISTEN_BACKLOG, interface=args.host)
    if args.workers == 1:
        install_stop_handlers(reactor)
        reactor.run()
        return 0
    return run_master(reactor, port, worker_argv, args.workers)


def install_stop_handlers(reactor, on_signal=lambda: None):
    """Stop the reactor once, however many stop requests arrive; returns the stop function.

    A worker gets the stop signal twice (the process group's, then the master's), and the
    reactor's own handlers call reactor.stop() for each, which logs ReactorNotRunning."""
    state = {"stopping": False}

    def mark_stopping():
        state["stopping"] = True

    def stop_once():
        if not state["stopping"]:
            state["stopping"] = True
            reactor.stop()

    def on_stop_signal(signum, frame):
        on_signal()
        reactor.callFromThread(stop_once)

    def install():
        # Runs once the reactor is running, so it replaces the reactor's own handlers.
        for signum in STOP_SIGNALS:
            signal.signal(signum, on_stop_signal)

    reactor.addSystemEventTrigger("before", "shutdown", mark_stopping)
    reactor.callWhenRunning(install)
    return stop_once


def run_master(reactor, port, worker_argv: list[str], workers: int) -> int:
    from twisted.internet import defer, error, protocol

    fd = port.fileno()
    ended: list[defer.Deferred] = []
    state = {"stopping": False, "failed": False}
    stop_once = install_stop_handlers(reactor, on_signal=lambda: state.update(stopping=True))

    class Worker(protocol.ProcessProtocol):
        def __init__(self) -> None:
            self.done = defer.Deferred()
            self.pid = None  # transport.pid is cleared once the process has ended

        def processEnded(self, reason) -> None:
            self.done.callback(None)
            if state["stopping"]:
                return
            # The stop signal goes to the whole process group, so a worker may see it (and end,
            # by its handler or, while still starting, by the default action) before we do.
            code, signum = reason.value.exitCode, reason.value.signal
            if code != 0 and signum not in STOP_SIGNALS:
                print(f"worker {self.pid} ended on its own ({reason.value}); stopping the others",
                      file=sys.stderr)
                state["failed"] = True
            state["stopping"] = True
            stop_once()

    children = []
    for _ in range(workers):
        worker = Worker()
        ended.append(worker.done)
        argv = worker_argv + ["--adopt-fd", str(fd)]
        child = reactor.spawnProcess(worker, sys.executable, argv, env=os.environ,
                                     childFDs={0: 0, 1: 1, 2: 2, fd: fd})
        worker.pid = child.pid
        children.append(child)
    # The master only supervises: the workers do all the accepting.
    port.stopReading()

    def stop_workers():
        state["stopping"] = True
        for child in children:
            try:
                child.signalProcess("TERM")
            except error.ProcessExitedAlready:
                pass
        return defer.DeferredList(ended)

    reactor.addSystemEventTrigger("before", "shutdown", stop_workers)
    reactor.run()
    return 1 if state["failed"] else 0
