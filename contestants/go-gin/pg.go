package main

import (
	"context"
	"fmt"
	"html/template"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TechEmpower's database scenarios (/db, /queries, /fortunes, /updates, /cached-queries) on PostgreSQL
// through pgx v5 and its pgxpool: one pool per process of -pg-pool connections, a request holding one for
// each query it makes (pgx runs one query at a time on a connection: no pipelining here). Gin renders the
// JSON (c.JSON) and the fortunes page (c.HTML with an html/template set on the engine).

const (
	worldRows  = 10000
	maxQueries = 500
	// TechEmpower requires a Server header on these answers; net/http adds Date itself.
	serverName = "go-gin"
)

type world struct {
	ID           int32 `json:"id"`
	RandomNumber int32 `json:"randomNumber"`
}

type fortune struct {
	ID      int32
	Message string
}

// html/template escapes each message (contextual escaping: HTML text here).
var fortunesTemplate = template.Must(template.New("fortunes").Parse(
	`<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>` +
		`{{range .}}<tr><td>{{.ID}}</td><td>{{.Message}}</td></tr>{{end}}</table></body></html>`))

// queriesParam is TechEmpower's clamp: a missing or non-numeric value is 1, then 1..500.
func queriesParam(c *gin.Context, name string) int {
	n, err := strconv.Atoi(c.Query(name))
	if err != nil || n < 1 {
		return 1
	}
	return min(n, maxQueries)
}

func randomID() int32 { return int32(rand.IntN(worldRows) + 1) }

func dbError(c *gin.Context, err error) {
	c.String(http.StatusInternalServerError, "database error: %v", err)
}

// readWorlds reads n random rows, each by its own query (TechEmpower forbids one IN (...) query).
func readWorlds(ctx context.Context, pool *pgxpool.Pool, n int) ([]world, error) {
	rows := make([]world, n)
	for i := range rows {
		if err := pool.QueryRow(ctx, "SELECT id, randomnumber FROM world WHERE id = $1", randomID()).
			Scan(&rows[i].ID, &rows[i].RandomNumber); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

func addPostgres(r *gin.Engine, url string, poolSize int) error {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.MaxConns = int32(poolSize)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	// /cached-queries answers from this copy of World, taken once at start.
	cache := make([]world, worldRows+1)
	rows, _ := pool.Query(ctx, "SELECT id, randomnumber FROM world")
	var w world
	if _, err := pgx.ForEachRow(rows, []any{&w.ID, &w.RandomNumber}, func() error {
		if w.ID < 1 || w.ID > worldRows {
			return fmt.Errorf("world has id %d outside 1..%d", w.ID, worldRows)
		}
		cache[w.ID] = w
		return nil
	}); err != nil {
		return fmt.Errorf("reading world for the cache: %w", err)
	}

	r.SetHTMLTemplate(fortunesTemplate)
	tfb := r.Group("/", func(c *gin.Context) { c.Header("Server", serverName) })
	tfb.GET("/db", func(c *gin.Context) {
		rows, err := readWorlds(c.Request.Context(), pool, 1)
		if err != nil {
			dbError(c, err)
			return
		}
		c.JSON(http.StatusOK, rows[0])
	})
	tfb.GET("/queries", func(c *gin.Context) {
		rows, err := readWorlds(c.Request.Context(), pool, queriesParam(c, "queries"))
		if err != nil {
			dbError(c, err)
			return
		}
		c.JSON(http.StatusOK, rows)
	})
	tfb.GET("/updates", func(c *gin.Context) {
		rows, err := readWorlds(c.Request.Context(), pool, queriesParam(c, "queries"))
		if err != nil {
			dbError(c, err)
			return
		}
		// An id drawn twice keeps its last number, in the answer too.
		last := make(map[int32]int32, len(rows))
		for i := range rows {
			rows[i].RandomNumber = randomID()
			last[rows[i].ID] = rows[i].RandomNumber
		}
		for i := range rows {
			rows[i].RandomNumber = last[rows[i].ID]
		}
		// One batched UPDATE (allowed), ids in ascending order so that concurrent requests lock rows in the
		// same order and cannot deadlock.
		ids := make([]int32, 0, len(last))
		for id := range last {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		numbers := make([]int32, len(ids))
		for i, id := range ids {
			numbers[i] = last[id]
		}
		if _, err := pool.Exec(c.Request.Context(), "UPDATE world SET randomnumber = v.n FROM unnest($1::int[], $2::int[]) AS v(id, n) WHERE world.id = v.id", ids, numbers); err != nil {
			dbError(c, err)
			return
		}
		c.JSON(http.StatusOK, rows)
	})
	tfb.GET("/cached-queries", func(c *gin.Context) {
		rows := make([]world, queriesParam(c, "count"))
		for i := range rows {
			rows[i] = cache[randomID()]
		}
		c.JSON(http.StatusOK, rows)
	})
	tfb.GET("/fortunes", func(c *gin.Context) {
		rows, _ := pool.Query(c.Request.Context(), "SELECT id, message FROM fortune")
		fortunes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[fortune])
		if err != nil {
			dbError(c, err)
			return
		}
		fortunes = append(fortunes, fortune{0, "Additional fortune added at request time."})
		slices.SortFunc(fortunes, func(a, b fortune) int { return strings.Compare(a.Message, b.Message) })
		c.HTML(http.StatusOK, "fortunes", fortunes)
	})
	return nil
}
