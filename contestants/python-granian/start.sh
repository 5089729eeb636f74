#!/bin/sh
# Starts Granian serving the one protocol netarena asks for (NETARENA_PROTOCOL):
#
#   start.sh GRANIAN [GRANIAN OPTION]...
#
# `--http 1` for h1 and h1-tls, `--http 2` for h2 and h2c. Granian's default, `--http auto`, would serve both at
# once: h2c beside HTTP/1.1 in cleartext (told apart by the client's first bytes), and over TLS h2 beside
# http/1.1 by ALPN, which a start for h1-tls must not offer. TLS itself comes from GRANIAN_SSL_CERTIFICATE and
# GRANIAN_SSL_KEYFILE (the manifest's start.env: the run's PEM files for h1-tls and h2, empty otherwise).
# The manifest's start command cannot choose the HTTP version itself: it is the same for every protocol.
set -eu

if [ "$#" -lt 1 ]; then
    echo "usage: start.sh GRANIAN [GRANIAN OPTION]..." >&2
    exit 2
fi
granian=$1
shift

protocol=${NETARENA_PROTOCOL:-h1}
case "$protocol" in
    h1 | h2c) ;;
    h1-tls | h2)
        # Without them Granian would serve cleartext where HTTPS was asked for.
        if [ -z "${GRANIAN_SSL_CERTIFICATE:-}" ] || [ -z "${GRANIAN_SSL_KEYFILE:-}" ]; then
            echo "start.sh: $protocol needs NETARENA_TLS_CERT and NETARENA_TLS_KEY (the manifest gives them to" \
                 "Granian as GRANIAN_SSL_CERTIFICATE and GRANIAN_SSL_KEYFILE, which are empty)" >&2
            exit 2
        fi
        ;;
    *)
        echo "start.sh: NETARENA_PROTOCOL must be h1, h1-tls, h2 or h2c (python-granian serves no other)," \
             "got '$protocol'" >&2
        exit 2
        ;;
esac
case "$protocol" in
    h1 | h1-tls) http=1 ;;
    *) http=2 ;;
esac
exec "$granian" --http "$http" "$@"
