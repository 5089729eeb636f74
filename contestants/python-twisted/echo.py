"""netarena echo contestant: Twisted's own echo protocol (twisted.protocols.wire.Echo) on a Factory.

Shared by python-twisted, python-twisted-asyncio (`--reactor asyncio`) and pypy-twisted.
"""

from __future__ import annotations

import os
import sys

from twisted.internet import protocol
from twisted.protocols import wire

from twisted_workers import argument_parser, check_args, serve


class Echo(wire.Echo):
    def connectionMade(self):
        self.transport.setTcpNoDelay(True)


class EchoFactory(protocol.Factory):
    protocol = Echo
    noisy = False


def main() -> int:
    parser = argument_parser(__doc__)
    args = parser.parse_args()
    check_args(parser, args)
    worker_argv = [sys.executable, os.path.abspath(__file__), "--port", str(args.port), "--workers", "1",
                   "--reactor", args.reactor]
    return serve(args, EchoFactory, worker_argv)


if __name__ == "__main__":
    sys.exit(main())
