// netarena contestant: valyala/fasthttp with its own server (fasthttp.Server): the HTTP scenarios, /mongo
// (mongo.go) and TechEmpower's database scenarios (pg.go).
//
// fasthttp's set-up as its README gives it: one fasthttp.RequestHandler routing on ctx.Path() (fasthttp has
// no router of its own; its examples switch on the path), fasthttp.FS for files, fasthttp.Server with its
// default settings. The server runs each connection in a goroutine from its worker pool, on GOMAXPROCS OS
// threads (the manifest sets GOMAXPROCS from {workers}). The listen backlog is the kernel's somaxconn, which
// Go's net.Listen passes to listen(); Go sets TCP_NODELAY on every TCP connection by default. With -tls-cert and
// -tls-key (netarena's h1-tls) it serves HTTPS through fasthttp.Server.ServeTLS.
package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
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

// intSuffix is the path after prefix as an integer in 0..max, or false.
func intSuffix(path, prefix []byte, max int) (int, bool) {
	rest, found := bytes.CutPrefix(path, prefix)
	if !found {
		return 0, false
	}
	n, err := strconv.Atoi(string(rest))
	return n, err == nil && n >= 0 && n <= max
}

var (
	helloPath  = []byte("/hello")
	jsonPath   = []byte("/json")
	bytesPath  = []byte("/bytes/")
	sleepPath  = []byte("/sleep/")
	staticPath = []byte("/static/")
	mongoPath  = []byte("/mongo/")
)

// newHandler routes the catalog's paths; mongo is nil without MongoDB, pg (TechEmpower's routes by path) nil
// without PostgreSQL.
func newHandler(staticDir string, mongo fasthttp.RequestHandler, pg map[string]fasthttp.RequestHandler) fasthttp.RequestHandler {
	fs := &fasthttp.FS{
		Root: staticDir,
		// /static/img/00001.jpg -> img/00001.jpg under Root.
		PathRewrite: fasthttp.NewPathPrefixStripper(len("/static")),
	}
	static := fs.NewRequestHandler()
	return func(ctx *fasthttp.RequestCtx) {
		if !ctx.IsGet() {
			ctx.Error("method not allowed", fasthttp.StatusMethodNotAllowed)
			return
		}
		path := ctx.Path()
		switch {
		case bytes.Equal(path, helloPath):
			ctx.SetContentType("text/plain")
			ctx.SetBodyString("Hello, World!")
		case bytes.Equal(path, jsonPath):
			body, err := json.Marshal(message{Message: "Hello, World!"})
			if err != nil {
				ctx.Error(err.Error(), fasthttp.StatusInternalServerError)
				return
			}
			ctx.SetContentType("application/json")
			ctx.SetBody(body)
		case bytes.HasPrefix(path, bytesPath):
			n, ok := intSuffix(path, bytesPath, maxBytesLen)
			if !ok {
				ctx.NotFound()
				return
			}
			ctx.SetContentType("application/octet-stream")
			// The shared body is never changed, so the response may point at it instead of copying it.
			ctx.Response.SetBodyRaw(bytesBody(n))
		case bytes.HasPrefix(path, sleepPath):
			ms, ok := intSuffix(path, sleepPath, maxSleepMs)
			if !ok {
				ctx.NotFound()
				return
			}
			// Blocks only this connection's goroutine; the runtime parks it and serves others.
			time.Sleep(time.Duration(ms) * time.Millisecond)
			ctx.SetContentType("text/plain")
			fmt.Fprintf(ctx, "slept %d", ms)
		case bytes.HasPrefix(path, staticPath):
			static(ctx)
		case mongo != nil && bytes.HasPrefix(path, mongoPath):
			mongo(ctx)
		default:
			// Go looks a map up by string(path) without copying path. A nil map holds nothing.
			if handler, ok := pg[string(path)]; ok {
				handler(ctx)
				return
			}
			ctx.NotFound()
		}
	}
}

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on (0.0.0.0: every address)")
	port := flag.Int("port", 0, "TCP port to listen on")
	staticDir := flag.String("static-dir", "", "folder served under /static/")
	mongoURL := flag.String("mongo-url", "", "mongodb:// URL of the fixture database (empty: no /mongo)")
	pgURL := flag.String("pg-url", "", "postgres:// URL of TechEmpower's database (empty: no /db, /queries, /fortunes, /updates, /cached-queries)")
	pgPool := flag.Int("pg-pool", 8, "connections in the PostgreSQL pool")
	tlsCert := flag.String("tls-cert", "", "PEM certificate: serve HTTPS with it (empty: cleartext)")
	tlsKey := flag.String("tls-key", "", "PEM private key of -tls-cert")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("go-fasthttp: ")
	if *port < 1 || *port > 65535 {
		log.Fatalf("-port must be 1..65535, got %d", *port)
	}
	if st, err := os.Stat(*staticDir); err != nil || !st.IsDir() {
		log.Fatalf("-static-dir %q is not a directory; pass the folder holding the static file set", *staticDir)
	}
	if *pgPool < 1 {
		log.Fatalf("-pg-pool must be at least 1, got %d", *pgPool)
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		log.Fatal("-tls-cert and -tls-key go together: give both (HTTPS) or neither (cleartext)")
	}
	for _, n := range []int{40, 10000, 524288} {
		bytesBody(n)
	}
	var mongo fasthttp.RequestHandler
	if *mongoURL != "" {
		var err error
		if mongo, err = mongoHandler(*mongoURL); err != nil {
			log.Fatalf("-mongo-url %q: %v", *mongoURL, err)
		}
	}
	var pg map[string]fasthttp.RequestHandler
	if *pgURL != "" {
		var err error
		if pg, err = postgresHandlers(*pgURL, *pgPool); err != nil {
			log.Fatalf("-pg-url %q: %v", *pgURL, err)
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		log.Fatalf("cannot listen on %s port %d: %v", *host, *port, err)
	}
	srv := &fasthttp.Server{Handler: newHandler(*staticDir, mongo, pg)}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		// Closes the listener and idle connections; Serve then returns nil. Connections still busy are cut
		// off by the orchestrator's stop timeout, as a benchmark server has nothing to flush.
		srv.Shutdown()
	}()
	if *tlsCert != "" {
		// h1-tls: fasthttp's own TLS, ServeTLS with the two files: crypto/tls over the listener, each connection's
		// handshake made by the goroutine serving it. crypto/tls's defaults (TLS 1.2 and 1.3, session tickets);
		// ALPN offers http/1.1 alone, the one protocol fasthttp speaks (it has no HTTP/2).
		srv.TLSConfig = &tls.Config{NextProtos: []string{"http/1.1"}}
		err = srv.ServeTLS(ln, *tlsCert, *tlsKey)
	} else {
		err = srv.Serve(ln)
	}
	if err != nil {
		log.Fatal(err)
	}
}
