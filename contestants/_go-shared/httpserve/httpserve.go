// Package httpserve serves a Go contestant's http.Handler over the protocol netarena started it for (-protocol,
// {protocol}): HTTP/1.1 in cleartext (h1) or over TLS (h1-tls), HTTP/2 over TLS (h2) or in cleartext with prior
// knowledge (h2c), each alone, so that a server started for one never serves another. Shared by go-net and
// go-gin, whose handlers differ and whose serving does not.
package httpserve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

// DrainTimeout: how long a stop waits for requests in flight before closing their connections.
const DrainTimeout = 3 * time.Second

// overTLS: netarena's protocols, and whether each is served over TLS.
var overTLS = map[string]bool{"h1": false, "h1-tls": true, "h2": true, "h2c": false}

// Check: the flags -protocol, -tls-cert and -tls-key agree (a TLS protocol with a certificate and key, the
// others without), or the error naming what to give.
func Check(protocol, tlsCert, tlsKey string) error {
	if (tlsCert == "") != (tlsKey == "") {
		return errors.New("-tls-cert and -tls-key go together: give both (HTTPS) or neither (cleartext)")
	}
	wantsTLS, known := overTLS[protocol]
	if !known {
		return fmt.Errorf("-protocol must be h1, h1-tls, h2 or h2c, got %q", protocol)
	}
	if wantsTLS != (tlsCert != "") {
		if wantsTLS {
			return fmt.Errorf("-protocol %s is served over TLS: give -tls-cert and -tls-key with it", protocol)
		}
		return fmt.Errorf("-protocol %s is served in cleartext: give -tls-cert and -tls-key only with h1-tls or h2",
			protocol)
	}
	return nil
}

// protocols: what net/http speaks for netarena's protocol, alone: HTTP/1.1 for h1 and h1-tls (ALPN offers
// http/1.1 only, where net/http would offer h2 too), HTTP/2 over TLS for h2 (ALPN offers h2 only), cleartext
// HTTP/2 with prior knowledge for h2c (http.Server.Protocols, Go 1.24+).
func protocols(protocol string) *http.Protocols {
	p := new(http.Protocols)
	switch protocol {
	case "h2":
		p.SetHTTP2(true)
	case "h2c":
		p.SetUnencryptedHTTP2(true)
	default:
		p.SetHTTP1(true)
	}
	return p
}

// Serve: handler on ln over `protocol` (Check first) until a value on stop, then a graceful shutdown of at most
// DrainTimeout.
func Serve(ln net.Listener, handler http.Handler, protocol, tlsCert, tlsKey string, stop <-chan os.Signal) error {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second, Protocols: protocols(protocol)}
	if tlsCert != "" {
		srv.TLSConfig = &tls.Config{} // crypto/tls's defaults (TLS 1.2 and 1.3); ALPN from Protocols
	}
	done := make(chan error, 1)
	go func() {
		<-stop
		ctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
		defer cancel()
		done <- srv.Shutdown(ctx)
	}()
	var err error
	if tlsCert != "" {
		err = srv.ServeTLS(ln, tlsCert, tlsKey)
	} else {
		err = srv.Serve(ln)
	}
	if !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	// Shutdown timing out only means a slow request was cut off; the stop itself succeeded.
	if err := <-done; err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
