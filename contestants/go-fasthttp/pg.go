package main

import (
	"encoding/json"

	"github.com/valyala/fasthttp"

	"netarena/contestants/techempower"
)

// TechEmpower's database scenarios (/db, /queries, /fortunes, /updates, /cached-queries): the queries and the
// fortunes template are contestants/_go-shared/techempower's (shared with go-net and go-gin); here fasthttp
// serves them. fasthttp.Server adds the Server header ("fasthttp", its default name) and Date to every answer,
// which TechEmpower requires.

// dbError answers a database error (ctx.Error resets whatever the handler had written).
func dbError(ctx *fasthttp.RequestCtx, err error) {
	ctx.Error("database error: "+err.Error(), fasthttp.StatusInternalServerError)
}

// writeJSON answers v as JSON, or the database error err when it is not nil.
func writeJSON(ctx *fasthttp.RequestCtx, v any, err error) {
	var body []byte
	if err == nil {
		body, err = json.Marshal(v)
	}
	if err != nil {
		dbError(ctx, err)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// postgresHandlers opens the pool and returns the handler of each route, for newHandler's switch on the path.
// Each handler passes the fasthttp.RequestCtx to pgx as its context.Context (fasthttp's RequestCtx is one: it
// is cancelled when the server shuts down); pgx lets go of it before the query returns, so nothing keeps the
// RequestCtx, which fasthttp reuses, after the handler returns.
func postgresHandlers(url string, poolSize int) (map[string]fasthttp.RequestHandler, error) {
	db, err := techempower.Connect(url, poolSize)
	if err != nil {
		return nil, err
	}
	queries := func(ctx *fasthttp.RequestCtx, name string) int {
		return techempower.Queries(string(ctx.QueryArgs().Peek(name)))
	}
	return map[string]fasthttp.RequestHandler{
		"/db": func(ctx *fasthttp.RequestCtx) {
			rows, err := db.ReadWorlds(ctx, 1)
			if err != nil {
				dbError(ctx, err)
				return
			}
			writeJSON(ctx, rows[0], nil)
		},
		"/queries": func(ctx *fasthttp.RequestCtx) {
			rows, err := db.ReadWorlds(ctx, queries(ctx, "queries"))
			writeJSON(ctx, rows, err)
		},
		"/updates": func(ctx *fasthttp.RequestCtx) {
			rows, err := db.UpdateWorlds(ctx, queries(ctx, "queries"))
			writeJSON(ctx, rows, err)
		},
		"/cached-queries": func(ctx *fasthttp.RequestCtx) {
			writeJSON(ctx, db.CachedWorlds(queries(ctx, "count")), nil)
		},
		"/fortunes": func(ctx *fasthttp.RequestCtx) {
			fortunes, err := db.Fortunes(ctx)
			if err != nil {
				dbError(ctx, err)
				return
			}
			ctx.SetContentType("text/html; charset=utf-8")
			// The page is written into the response body (RequestCtx is an io.Writer); a template error,
			// which the fixed template cannot make, would replace it through ctx.Error.
			if err := techempower.FortunesTemplate.Execute(ctx, fortunes); err != nil {
				ctx.Error(err.Error(), fasthttp.StatusInternalServerError)
			}
		},
	}, nil
}
