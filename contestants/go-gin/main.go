// netarena contestant: Gin (gin-gonic/gin) on Go's net/http server, HTTP scenarios only.
//
// Gin's production set-up as its docs give it: release mode (gin.SetMode(gin.ReleaseMode), which also turns
// off its debug route printing), gin.New() with the Recovery middleware and without the request Logger
// (gin.Default() is both: the logger writes a line per request), the engine served by the standard library's
// http.Server. Concurrency is Go's own: one goroutine per connection on GOMAXPROCS threads (the manifest sets
// GOMAXPROCS from {workers}). The listen backlog is the kernel's somaxconn, which Go reads itself; Go sets
// TCP_NODELAY on every TCP connection by default.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
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

// intParam is the path parameter as an integer in 0..max, or false.
func intParam(c *gin.Context, name string, max int) (int, bool) {
	n, err := strconv.Atoi(c.Param(name))
	return n, err == nil && n >= 0 && n <= max
}

func newEngine(staticDir string) *gin.Engine {
	r := gin.New()
	r.Use(gin.Recovery())
	r.GET("/hello", func(c *gin.Context) {
		c.String(http.StatusOK, "Hello, World!")
	})
	r.GET("/json", func(c *gin.Context) {
		c.JSON(http.StatusOK, gin.H{"message": "Hello, World!"})
	})
	r.GET("/bytes/:n", func(c *gin.Context) {
		n, ok := intParam(c, "n", maxBytesLen)
		if !ok {
			c.Status(http.StatusNotFound)
			return
		}
		c.Data(http.StatusOK, "application/octet-stream", bytesBody(n))
	})
	r.GET("/sleep/:ms", func(c *gin.Context) {
		ms, ok := intParam(c, "ms", maxSleepMs)
		if !ok {
			c.Status(http.StatusNotFound)
			return
		}
		// Blocks only this request's goroutine; the runtime parks it and serves others.
		time.Sleep(time.Duration(ms) * time.Millisecond)
		c.String(http.StatusOK, "slept %d", ms)
	})
	// Gin's static route: http.FileServer over the folder, directory listings off.
	r.Static("/static", staticDir)
	return r
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
	protocol := flag.String("protocol", "h1", "h1, h1-tls, h2 (both with -tls-cert) or h2c: what the server speaks")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("go-gin: ")
	if *port < 1 || *port > 65535 {
		log.Fatalf("-port must be 1..65535, got %d", *port)
	}
	if err := httpserve.Check(*protocol, *tlsCert, *tlsKey); err != nil {
		log.Fatal(err)
	}
	if st, err := os.Stat(*staticDir); err != nil || !st.IsDir() {
		log.Fatalf("-static-dir %q is not a directory; pass the folder holding the static file set", *staticDir)
	}
	gin.SetMode(gin.ReleaseMode)
	for _, n := range []int{40, 10000, 524288} {
		bytesBody(n)
	}
	engine := newEngine(*staticDir)
	if *pgPool < 1 {
		log.Fatalf("-pg-pool must be at least 1, got %d", *pgPool)
	}
	if *pgURL != "" {
		if err := addPostgres(engine, *pgURL, *pgPool); err != nil {
			log.Fatalf("-pg-url %q: %v", *pgURL, err)
		}
	}
	if *mongoURL != "" {
		if err := addMongo(engine, *mongoURL); err != nil {
			log.Fatalf("-mongo-url %q: %v", *mongoURL, err)
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		log.Fatalf("cannot listen on %s port %d: %v", *host, *port, err)
	}
	if err := httpserve.Serve(ln, engine, *protocol, *tlsCert, *tlsKey, stop); err != nil {
		log.Fatal(fmt.Errorf("serving: %w", err))
	}
}
