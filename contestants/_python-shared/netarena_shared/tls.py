"""The server side of netarena's h1-tls protocol, for the Python contestants serving TLS themselves.

netarena starts a server for an h1-tls level with NETARENA_TLS_CERT and NETARENA_TLS_KEY naming the run's PEM
certificate and key, and for every other level without them: the server serves HTTPS exactly when they are set.
"""

import os
import ssl


def server_context(context_class=ssl.SSLContext):
    """An ssl.SSLContext serving the run's certificate (the standard library's ssl module, OpenSSL's defaults:
    TLS 1.2 and 1.3; ALPN http/1.1, the one protocol served), or None for a cleartext start.

    context_class: a green framework's subclass of ssl.SSLContext whose sockets wait on its hub instead of
    blocking the process (eventlet.green.ssl.SSLContext) where the standard library is not patched to give it."""
    cert = os.environ.get("NETARENA_TLS_CERT")
    if not cert:
        return None
    context = context_class(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, os.environ["NETARENA_TLS_KEY"])
    context.set_alpn_protocols(["http/1.1"])
    return context
