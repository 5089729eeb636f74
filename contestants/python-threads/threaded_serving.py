"""What server.py (ThreadingHTTPServer) and echo.py (ThreadingTCPServer) both need from socketserver."""
import signal
import ssl
import sys
import threading
import time

# The catalog asks for >= 1024; socketserver's default request_queue_size is 5.
LISTEN_BACKLOG = 4096


class ThreadPerConnection:
    """Mixed in before a socketserver.Threading*Server class."""

    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # A client closing or resetting its connection (every load generator does at the end), or over TLS
        # leaving or refusing a handshake, is not a server error; socketserver would print a traceback for each.
        if isinstance(sys.exc_info()[1], (ConnectionError, ssl.SSLError)):
            return
        super().handle_error(request, client_address)


class PooledThreads:
    """Mixed in before ThreadPerConnection and a socketserver.Threading*Server class: with pool_size > 0 a fixed
    pool of that many threads, each accepting a connection and serving it until it closes, as uWSGI's
    --threads do; the connections no thread has taken wait in the kernel's accept queue (`ss -ltn` Recv-Q),
    instead of a new thread per connection."""

    pool_size = 0

    def serve_forever(self, poll_interval=0.5):
        if not self.pool_size:
            super().serve_forever(poll_interval)
            return
        for index in range(self.pool_size):
            # Daemon threads, as daemon_threads = True: a thread blocked on an idle keep-alive connection must
            # not hold up the exit on SIGTERM.
            threading.Thread(target=self._accept_and_serve, name=f"pool-{index}", daemon=True).start()
        while True:
            time.sleep(3600)  # the stop signal's handler ends the process from here

    def _accept_and_serve(self):
        while True:
            try:
                request, client_address = self.get_request()
            except OSError:
                if self.socket.fileno() < 0:
                    return  # the listening socket was closed: the server is stopping
                # One connection lost as it was taken (over TLS, a client gone before its socket was wrapped),
                # as socketserver's own accept loop drops it: the next one is served.
                continue
            # ThreadingMixIn's body of a connection's thread: handle it, report errors, close it.
            self.process_request_thread(request, client_address)


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
