#!/bin/sh
# Starts the staged Play app listening for the protocol netarena asks for (NETARENA_PROTOCOL):
#
#   start.sh APP HOST PORT RUN_DIR [JVM OPTION]...
#
# h1 listens with Play's HTTP listener on PORT. h1-tls listens with Play's HTTPS listener on PORT instead
# (http.port=disabled): Pekko HTTP over the JDK's TLS (JSSE), its key and certificate from a keystore. Play reads
# them from a keystore file only (JKS or PKCS12, no PEM), so the run's PEM files (NETARENA_TLS_CERT,
# NETARENA_TLS_KEY) are put into a PKCS12 keystore in RUN_DIR first, with Debian's openssl; its password guards
# nothing (the PEM key beside it is not encrypted either). TLS 1.3 and 1.2, as the other contestants: Pekko's
# ssl-config, which Pekko HTTP's HTTPS follows, allows TLS 1.2 alone by default (pekko-stream's reference.conf:
# ssl-config.protocol = "TLSv1.2"; checked with openssl s_client).
# Play's HTTP/2 (Pekko HTTP's, play.server.pekko.http2.enabled) is on for h2 and h2c only: h2 is the same HTTPS
# listener with it, h2c the HTTP listener with it. Off, ALPN never chooses h2 and the HTTP listener takes no
# HTTP/2 preface. The setting is what Play's PlayPekkoHttp2Support plugin turns on (its play-pekko-http2-support
# module holds nothing else), given here since that module is not on the Maven Central netarena resolves from.
# The manifest's start command cannot do this itself: {tls_cert} and {tls_key} are empty for a cleartext start.
set -eu

if [ "$#" -lt 4 ]; then
    echo "usage: start.sh APP HOST PORT RUN_DIR [JVM OPTION]..." >&2
    exit 2
fi
app=$1
host=$2
port=$3
run_dir=$4
shift 4

protocol=${NETARENA_PROTOCOL:-h1}
case "$protocol" in
    h1 | h1-tls) http2=false ;;
    h2 | h2c) http2=true ;;
    *)
        echo "start.sh: NETARENA_PROTOCOL must be h1, h1-tls, h2 or h2c (play-scala serves no other), got" \
             "'$protocol'" >&2
        exit 2
        ;;
esac

case "$protocol" in
    h1 | h2c)
        exec "$app" "-Dhttp.port=$port" "-Dhttp.address=$host" "-Dplay.server.pekko.http2.enabled=$http2" "$@"
        ;;
    *)
        if [ -z "${NETARENA_TLS_CERT:-}" ] || [ -z "${NETARENA_TLS_KEY:-}" ]; then
            echo "start.sh: $protocol needs NETARENA_TLS_CERT and NETARENA_TLS_KEY" >&2
            exit 2
        fi
        keystore=$run_dir/play-https.p12
        password=netarena-not-a-secret
        openssl pkcs12 -export -in "$NETARENA_TLS_CERT" -inkey "$NETARENA_TLS_KEY" -name netarena \
            -out "$keystore" -passout "pass:$password"
        exec "$app" -Dhttp.port=disabled "-Dhttps.port=$port" "-Dhttp.address=$host" \
            "-Dplay.server.https.keyStore.path=$keystore" -Dplay.server.https.keyStore.type=PKCS12 \
            "-Dplay.server.https.keyStore.password=$password" \
            -Dpekko.ssl-config.protocol=TLSv1.3 -Dpekko.ssl-config.enabledProtocols.0=TLSv1.3 \
            -Dpekko.ssl-config.enabledProtocols.1=TLSv1.2 "-Dplay.server.pekko.http2.enabled=$http2" "$@"
        ;;
esac
