"""Launch nginx for netarena: fill nginx.conf.template and exec nginx in the foreground.

Usage: python3 run.py [--host H] --port P --workers W --static-dir D --run-dir R

Everything nginx writes (pid, temp files, the generated config) goes to the run dir, so
it needs neither /run nor /var/lib/nginx and several instances on different ports do not collide.
stdlib only; exec keeps nginx's master as the process the orchestrator signals.
With NETARENA_TLS_CERT and NETARENA_TLS_KEY set (netarena's h1-tls and h2 protocols) the listener serves HTTPS
with them (`listen ... ssl`, ssl_certificate) instead of cleartext. NETARENA_PROTOCOL says which protocol: h2
adds `http2` to the TLS listener (ALPN offers h2), h2c adds it to the cleartext one (HTTP/2 with prior
knowledge only: nginx 1.22 then speaks no HTTP/1.1 on that port); h1 and h1-tls leave it off.
"""

import argparse
import os
import pwd
import grp
import resource
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Debian installs nginx in /usr/sbin, which is not on a regular user's PATH.
NGINX_CANDIDATES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx")
MAX_NOFILE = 65536


def die(message: str) -> None:
    print(f"nginx/run.py: {message}", file=sys.stderr)
    sys.exit(2)


def find_nginx() -> str:
    found = shutil.which("nginx") or next((p for p in NGINX_CANDIDATES if os.access(p, os.X_OK)), None)
    if found is None:
        die("nginx not found on PATH or in /usr/sbin; install it with: apt-get install nginx")
    return found


# netarena's protocols (NETARENA_PROTOCOL) and whether each is over TLS, spoken as HTTP/2.
PROTOCOLS = {"h1": (False, False), "h1-tls": (True, False), "h2": (True, True), "h2c": (False, True)}


def protocol_values() -> dict[str, str]:
    """The listener's protocol: TLS with the certificate and key netarena gives (NETARENA_TLS_CERT /
    NETARENA_TLS_KEY; TLS 1.2 and 1.3, nginx's default ciphers) or cleartext, and HTTP/2 (`http2`) when
    NETARENA_PROTOCOL is h2 or h2c. h2c serves files without sendfile: nginx 1.22 writes an HTTP/2 response's
    HEADERS frame and then sendfile()s its body on a cleartext connection without TCP_NODELAY, and the body waits
    for the client's delayed ACK (Nagle, about 40 ms; netarena verify's check fails it). Over TLS nginx never uses
    sendfile (no kTLS), and its HTTP/1.1 path sets TCP_NODELAY."""
    cert, key = os.environ.get("NETARENA_TLS_CERT"), os.environ.get("NETARENA_TLS_KEY")
    # Unset (started by hand): HTTP/1.1, over TLS when given a certificate.
    protocol = os.environ.get("NETARENA_PROTOCOL") or ("h1-tls" if cert else "h1")
    if protocol not in PROTOCOLS:
        die(f"NETARENA_PROTOCOL={protocol!r} is not one of {', '.join(PROTOCOLS)}")
    over_tls, http2 = PROTOCOLS[protocol]
    if over_tls != bool(cert):
        die(f"NETARENA_PROTOCOL={protocol} is {'over TLS' if over_tls else 'cleartext'} but NETARENA_TLS_CERT is "
            f"{'unset' if over_tls else 'set'}: netarena gives the certificate exactly to h1-tls and h2 servers")
    listen = (" ssl" if over_tls else "") + (" http2" if http2 else "")
    sendfile = "off" if http2 and not over_tls else "on"
    if not cert:
        return {"@LISTEN_TLS@": listen, "@TLS_LINES@": "", "@SENDFILE@": sendfile}
    if not key:
        die("NETARENA_TLS_CERT is set but NETARENA_TLS_KEY is not: both name the PEM files of the certificate")
    lines = (f"ssl_certificate {cert};\n        ssl_certificate_key {key};\n"
             "        ssl_protocols TLSv1.2 TLSv1.3;")
    return {"@LISTEN_TLS@": listen, "@TLS_LINES@": lines, "@SENDFILE@": sendfile}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every address)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--static-dir", required=True)
    parser.add_argument("--run-dir", required=True, help="private folder for config, pid, logs, temp files")
    args = parser.parse_args()
    if not 1 <= args.port <= 65535:
        die(f"--port must be 1..65535, got {args.port}")
    if args.workers < 1:
        die(f"--workers must be >= 1, got {args.workers}")
    static_dir = Path(args.static_dir).resolve()
    if not static_dir.is_dir():
        die(f"--static-dir {static_dir} is not a directory; pass the folder holding the static file set")

    run_dir = Path(args.run_dir).resolve() / f"port-{args.port}"
    run_dir.mkdir(parents=True, exist_ok=True)

    # Started as root, nginx drops its workers to `nobody`, which cannot read a static set under
    # /root; keep them as the invoking user instead (a loopback benchmark, not a public server).
    user_line = ""
    if os.geteuid() == 0:
        user_line = f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};"
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    nofile = MAX_NOFILE if hard == resource.RLIM_INFINITY else min(hard, MAX_NOFILE)

    values = {
        "@USER_LINE@": user_line,
        "@WORKERS@": str(args.workers),
        "@HOST@": args.host,
        "@PORT@": str(args.port),
        "@STATIC_DIR@": str(static_dir),
        "@RUN_DIR@": str(run_dir),
        "@NOFILE@": str(nofile),
        # Leave headroom for the log, listening socket and files open for sendfile.
        "@WORKER_CONNECTIONS@": str(max(1024, nofile // 2)),
    }
    values.update(protocol_values())
    conf = (HERE / "nginx.conf.template").read_text()
    for key, value in values.items():
        conf = conf.replace(key, value)
    conf_path = run_dir / "nginx.conf"
    conf_path.write_text(conf)

    nginx = find_nginx()
    os.execv(nginx, [nginx, "-p", str(run_dir), "-c", str(conf_path), "-g", "daemon off;"])


if __name__ == "__main__":
    main()
