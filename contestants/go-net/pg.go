package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"netarena/contestants/techempower"
)

// TechEmpower's database scenarios (/db, /queries, /fortunes, /updates, /cached-queries): the queries and the
// fortunes template are contestants/_go-shared/techempower's (shared with go-gin); here net/http serves them.

// TechEmpower requires a Server header on these answers; net/http adds Date itself.
const serverName = "go-net"

func writeBody(w http.ResponseWriter, contentType string, body []byte) {
	h := w.Header()
	h.Set("Server", serverName)
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}

// writeJSON answers v, or the database error err when it is not nil.
func writeJSON(w http.ResponseWriter, v any, err error) {
	var body []byte
	if err == nil {
		body, err = json.Marshal(v)
	}
	if err != nil {
		w.Header().Set("Server", serverName)
		http.Error(w, "database error: "+err.Error(), http.StatusInternalServerError)
		return
	}
	writeBody(w, "application/json", body)
}

func addPostgres(mux *http.ServeMux, url string, poolSize int) error {
	db, err := techempower.Connect(url, poolSize)
	if err != nil {
		return err
	}
	queries := func(r *http.Request, name string) int { return techempower.Queries(r.URL.Query().Get(name)) }
	mux.HandleFunc("GET /db", func(w http.ResponseWriter, r *http.Request) {
		rows, err := db.ReadWorlds(r.Context(), 1)
		if err != nil {
			writeJSON(w, nil, err)
			return
		}
		writeJSON(w, rows[0], nil)
	})
	mux.HandleFunc("GET /queries", func(w http.ResponseWriter, r *http.Request) {
		rows, err := db.ReadWorlds(r.Context(), queries(r, "queries"))
		writeJSON(w, rows, err)
	})
	mux.HandleFunc("GET /updates", func(w http.ResponseWriter, r *http.Request) {
		rows, err := db.UpdateWorlds(r.Context(), queries(r, "queries"))
		writeJSON(w, rows, err)
	})
	mux.HandleFunc("GET /cached-queries", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, db.CachedWorlds(queries(r, "count")), nil)
	})
	mux.HandleFunc("GET /fortunes", func(w http.ResponseWriter, r *http.Request) {
		fortunes, err := db.Fortunes(r.Context())
		if err != nil {
			writeJSON(w, nil, err)
			return
		}
		var page strings.Builder
		if err := techempower.FortunesTemplate.Execute(&page, fortunes); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeBody(w, "text/html; charset=utf-8", []byte(page.String()))
	})
	return nil
}
