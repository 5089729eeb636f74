"""netarena echo contestant: an asyncio.Protocol that writes back every byte it receives.

Shared by python-asyncio and python-uvloop (`--loop uvloop`).
"""

import argparse
import asyncio
import os
import signal
import socket
import sys

from server import LISTEN_BACKLOG, install_loop
from supervisor import run_workers


class EchoProtocol(asyncio.Protocol):
    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)

    # Flow control: a client that sends faster than it reads pauses us instead of filling memory.
    def pause_writing(self) -> None:
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.transport.resume_reading()


async def serve(args) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(EchoProtocol, args.host, args.port, backlog=LISTEN_BACKLOG,
                                      reuse_port=args.workers > 1 or args.reuse_port)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    server.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every address)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    parser.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    if args.workers > 1:
        argv = [sys.executable, os.path.abspath(__file__), "--host", args.host, "--port", str(args.port), "--workers", "1",
                "--loop", args.loop, "--reuse-port"]
        return run_workers(argv, args.workers)
    install_loop(args.loop)
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
