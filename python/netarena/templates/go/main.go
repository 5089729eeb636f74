// A netarena contestant written by `netarena new`: Go's standard library only, so it builds instantly.
//
// Every route of the scenario catalog (docs/scenarios.md) is here; the manifest lists the ones it claims.
// What verification holds every server to: HTTP/1.1 keep-alive, 127.0.0.1 only, a listen backlog of at least
// 1024 (Go passes net.core.somaxconn to listen), TCP_NODELAY (Go's default), and the exact bodies below.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

var bytesBodies sync.Map // built once per size, not per request (the catalog's rule)

func reply(w http.ResponseWriter, contentType string, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}

func number(path, prefix string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(path, prefix))
	return n, err == nil && n >= 0
}

func main() {
	port := flag.Int("port", 0, "TCP port on 127.0.0.1")
	staticDir := flag.String("static-dir", ".", "folder served under /static/")
	echo := flag.Bool("echo", false, "serve the TCP echo scenario instead of HTTP")
	flag.Parse()
	listener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		log.Fatal(err)
	}
	if *echo {
		for {
			conn, err := listener.Accept()
			if err != nil {
				log.Fatal(err)
			}
			go func() { io.Copy(conn, conn); conn.Close() }()
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		reply(w, "text/plain", []byte("Hello, World!"))
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		body, _ := json.Marshal(map[string]string{"message": "Hello, World!"})
		reply(w, "application/json", body)
	})
	mux.HandleFunc("/bytes/", func(w http.ResponseWriter, r *http.Request) {
		n, ok := number(r.URL.Path, "/bytes/")
		if !ok {
			http.NotFound(w, r)
			return
		}
		body, _ := bytesBodies.LoadOrStore(n, []byte(strings.Repeat("*", n)))
		reply(w, "application/octet-stream", body.([]byte))
	})
	mux.HandleFunc("/sleep/", func(w http.ResponseWriter, r *http.Request) {
		ms, ok := number(r.URL.Path, "/sleep/")
		if !ok {
			http.NotFound(w, r)
			return
		}
		time.Sleep(time.Duration(ms) * time.Millisecond) // parks this goroutine only
		reply(w, "text/plain", []byte(fmt.Sprintf("slept %d", ms)))
	})
	mux.Handle("/static/", http.StripPrefix("/static/", http.FileServer(http.Dir(*staticDir))))
	log.Fatal(http.Serve(listener, mux))
}
