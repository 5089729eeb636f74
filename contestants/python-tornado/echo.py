"""netarena contestant: tornado.tcpserver.TCPServer echo, one coroutine per connection."""
import tornado.ioloop
import tornado.iostream
import tornado.tcpserver

from netarena_shared.cli import parse_args
from tornado_workers import bind_and_fork, serve_until_stopped

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
    args = parse_args(__doc__, static_dir=False)
    sockets = bind_and_fork(args.host, args.port, args.workers)
    server = EchoServer()
    serve_until_stopped(server, sockets)


if __name__ == "__main__":
    main()
