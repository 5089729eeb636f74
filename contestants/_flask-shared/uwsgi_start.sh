#!/bin/sh
# Starts uWSGI listening for the protocol netarena asks for (NETARENA_PROTOCOL), shared by the uWSGI contestants.
#
#   uwsgi_start.sh UWSGI CLEARTEXT_OPTION ADDRESS [UWSGI OPTION]...
#
# h1 listens with `CLEARTEXT_OPTION ADDRESS` (--http11-socket or --http). h1-tls listens with uWSGI's HTTPS router,
# `--https ADDRESS,CERT,KEY` (OpenSSL inside uWSGI), instead: --https-socket, the workers' own TLS socket, closes
# the connection after every response (its close hook has no keep-alive, uWSGI 2.0.31), while the router keeps
# connections alive with --http-keepalive, which the remaining options must carry. The router offers no ALPN
# (only NPN, and only for --https2 with spdy), so a client offering h2 speaks HTTP/1.1.
# The manifest's start command cannot do this itself: {tls_cert} and {tls_key} are empty for a cleartext start.
set -eu

if [ "$#" -lt 3 ]; then
    echo "usage: uwsgi_start.sh UWSGI CLEARTEXT_OPTION ADDRESS [UWSGI OPTION]..." >&2
    exit 2
fi
uwsgi=$1
cleartext_option=$2
address=$3
shift 3

case "${NETARENA_PROTOCOL:-h1}" in
    h1)
        exec "$uwsgi" "$cleartext_option" "$address" "$@"
        ;;
    h1-tls)
        if [ -z "${NETARENA_TLS_CERT:-}" ] || [ -z "${NETARENA_TLS_KEY:-}" ]; then
            echo "uwsgi_start.sh: h1-tls needs NETARENA_TLS_CERT and NETARENA_TLS_KEY" >&2
            exit 2
        fi
        # pip compiles uWSGI with SSL only when OpenSSL's headers are there; without them --https does not exist.
        if ! "$uwsgi" --help | grep -q -e '^ *--https '; then
            echo "uwsgi_start.sh: $uwsgi was built without SSL (OpenSSL's headers, Debian's libssl-dev, were" \
                 "missing when pip compiled it), so it cannot serve h1-tls: install libssl-dev, then rebuild" \
                 "uWSGI (remove its venv and uWSGI's cached wheel) and install again" >&2
            exit 1
        fi
        # uWSGI splits the value at commas: a comma in a path would shift the certificate into the key.
        case "$NETARENA_TLS_CERT$NETARENA_TLS_KEY" in
            *,*)
                echo "uwsgi_start.sh: uWSGI's --https cannot take a certificate or key path with a comma" >&2
                exit 2
                ;;
        esac
        exec "$uwsgi" --https "$address,$NETARENA_TLS_CERT,$NETARENA_TLS_KEY" "$@"
        ;;
    *)
        echo "uwsgi_start.sh: uWSGI serves h1 and h1-tls here, not ${NETARENA_PROTOCOL}" >&2
        exit 2
        ;;
esac
