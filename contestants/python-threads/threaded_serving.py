"""What server.py (ThreadingHTTPServer) and echo.py (ThreadingTCPServer) both need from socketserver."""
import signal
import sys

# The catalog asks for >= 1024; socketserver's default request_queue_size is 5.
LISTEN_BACKLOG = 4096


class ThreadPerConnection:
    """Mixed in before a socketserver.Threading*Server class."""

    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # A client closing or resetting its connection (every load generator does at the end) is
        # not a server error; socketserver would print a traceback for each one.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def serve_until_stopped(server) -> int:
    # The default SIGTERM action would kill us mid-write; exit through serve_forever instead.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
