"""netarena contestant: tornado.tcpserver.TCPServer echo, one coroutine per connection."""
import argparse
import signal
import sys

import tornado.ioloop
import tornado.iostream
import tornado.netutil
import tornado.process
import tornado.tcpserver

READ_BYTES = 65536


class EchoServer(tornado.tcpserver.TCPServer):
    async def handle_stream(self, stream, address):
        # IOStream sets TCP_NODELAY only on request; echo wants every chunk out at once.
        stream.set_nodelay(True)
        try:
            while True:
                chunk = await stream.read_bytes(READ_BYTES, partial=True)
                await stream.write(chunk)
        except tornado.iostream.StreamClosedError:
            pass


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    if args.workers < 1:
        sys.exit(f"--workers must be >= 1, got {args.workers}")

    sockets = tornado.netutil.bind_sockets(args.port, address="127.0.0.1", backlog=2048)
    if args.workers > 1:
        # fork_processes' parent only supervises: it returns only in the children and exits 0 once every child
        # exited 0. So it ignores the stop signal (which reaches the whole process group) and waits for them,
        # rather than exiting first and leaving them orphaned.
        signal.signal(signal.SIGTERM, lambda *_: None)
        tornado.process.fork_processes(args.workers)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = EchoServer()
    server.add_sockets(sockets)
    tornado.ioloop.IOLoop.current().start()


if __name__ == "__main__":
    main()
