// netarena contestant: Go's net/http for the HTTP scenarios and net for echo.
//
// Concurrency is Go's own: one goroutine per connection, multiplexed by the runtime onto
// GOMAXPROCS threads (the manifest sets GOMAXPROCS from {workers}). The listen backlog is
// the kernel's somaxconn, which Go reads itself; Go sets TCP_NODELAY on every TCP
// connection by default.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"netarena/contestants/httpserve"
)

// Refuse absurd /bytes/{n} and /sleep/{ms} so one request cannot exhaust memory or hang forever.
const (
	maxBytesLen = 64 << 20
	maxSleepMs  = 600_000
)

// bytesBodies holds each /bytes/{n} body, built on first use and shared afterwards.
var bytesBodies sync.Map // int -> []byte

func bytesBody(n int) []byte {
	if body, ok := bytesBodies.Load(n); ok {
		return body.([]byte)
	}
	body := make([]byte, n)
	for i := range body {
		body[i] = '*'
	}
	actual, _ := bytesBodies.LoadOrStore(n, body)
	return actual.([]byte)
}

type message struct {
	Message string `json:"message"`
}

func newMux(staticDir string) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "Hello, World!")
	})
	mux.HandleFunc("GET /json", func(w http.ResponseWriter, r *http.Request) {
		body, err := json.Marshal(message{Message: "Hello, World!"})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	mux.HandleFunc("GET /bytes/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.PathValue("n"))
		if err != nil || n < 0 || n > maxBytesLen {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(bytesBody(n))
	})
	mux.HandleFunc("GET /sleep/{ms}", func(w http.ResponseWriter, r *http.Request) {
		ms, err := strconv.Atoi(r.PathValue("ms"))
		if err != nil || ms < 0 || ms > maxSleepMs {
			http.NotFound(w, r)
			return
		}
		// Blocks only this request's goroutine; the runtime parks it and serves others.
		time.Sleep(time.Duration(ms) * time.Millisecond)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "slept %d", ms)
	})
	if staticDir != "" {
		mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServer(http.Dir(staticDir))))
	}
	return mux
}

// httpHandler is every HTTP route, its databases connected. It is built before the listening socket opens:
// a server that accepted connections while still reading World for /cached-queries would look ready, and a
// check counting queries from then on would count that read too.
func httpHandler(staticDir, mongoURL, pgURL string, pgPool int) (http.Handler, error) {
	for _, n := range []int{40, 10000, 524288} {
		bytesBody(n)
	}
	mux := newMux(staticDir)
	if mongoURL != "" {
		if err := addMongo(mux, mongoURL); err != nil {
			return nil, fmt.Errorf("-mongo-url %q: %w", mongoURL, err)
		}
	}
	if pgURL != "" {
		if err := addPostgres(mux, pgURL, pgPool); err != nil {
			return nil, fmt.Errorf("-pg-url %q: %w", pgURL, err)
		}
	}
	return mux, nil
}

func echo(conn net.Conn) {
	defer conn.Close()
	io.Copy(conn, conn)
}

func serveEcho(ln net.Listener, stop <-chan os.Signal) error {
	go func() {
		<-stop
		ln.Close()
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of file descriptors and similar: back off rather than spin.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go echo(conn)
	}
}

func main() {
	mode := flag.String("mode", "http", "http or echo")
	host := flag.String("host", "127.0.0.1", "address to listen on (0.0.0.0: every address)")
	port := flag.Int("port", 0, "TCP port to listen on")
	staticDir := flag.String("static-dir", "", "folder served under /static/")
	mongoURL := flag.String("mongo-url", "", "mongodb:// URL of the fixture database (empty: no /mongo)")
	pgURL := flag.String("pg-url", "", "postgres:// URL of TechEmpower's database (empty: no /db, /queries, /fortunes, /updates, /cached-queries)")
	pgPool := flag.Int("pg-pool", 8, "connections in the PostgreSQL pool")
	tlsCert := flag.String("tls-cert", "", "PEM certificate: serve HTTPS with it (empty: cleartext)")
	tlsKey := flag.String("tls-key", "", "PEM private key of -tls-cert")
	protocol := flag.String("protocol", "h1", "h1, h1-tls, h2 (both with -tls-cert) or h2c: what the server speaks")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("go-net: ")
	if *port < 1 || *port > 65535 {
		log.Fatalf("-port must be 1..65535, got %d", *port)
	}
	if *pgPool < 1 {
		log.Fatalf("-pg-pool must be at least 1, got %d", *pgPool)
	}
	if err := httpserve.Check(*protocol, *tlsCert, *tlsKey); err != nil {
		log.Fatal(err)
	}
	if *mode != "http" && *mode != "echo" {
		log.Fatalf("-mode must be http or echo, got %q", *mode)
	}
	if *mode == "http" && *staticDir != "" {
		if st, err := os.Stat(*staticDir); err != nil || !st.IsDir() {
			log.Fatalf("-static-dir %q is not a directory; pass the folder holding the static file set", *staticDir)
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)

	var handler http.Handler
	if *mode == "http" {
		var err error
		if handler, err = httpHandler(*staticDir, *mongoURL, *pgURL, *pgPool); err != nil {
			log.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		log.Fatalf("cannot listen on %s port %d: %v", *host, *port, err)
	}
	if *mode == "echo" {
		err = serveEcho(ln, stop)
	} else {
		err = httpserve.Serve(ln, handler, *protocol, *tlsCert, *tlsKey, stop)
	}
	if err != nil {
		log.Fatal(err)
	}
}
