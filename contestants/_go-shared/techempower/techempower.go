// Package techempower is TechEmpower's database scenarios (/db, /queries, /fortunes, /updates,
// /cached-queries) on PostgreSQL through pgx v5 and its pgxpool, shared by go-net, go-gin and go-fasthttp
// (each builds it through a replace directive in its go.mod). It reads and writes rows and renders nothing
// but the fortunes template; each contestant serves the answers with its own framework.
//
// One pool per process of poolSize connections, a request holding one for each query it makes (pgx runs
// one query at a time on a connection: no pipelining here).
package techempower

import (
	"context"
	"fmt"
	"html/template"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	worldRows  = 10000
	maxQueries = 500
)

type World struct {
	ID           int32 `json:"id"`
	RandomNumber int32 `json:"randomNumber"`
}

type Fortune struct {
	ID      int32
	Message string
}

// FortunesTemplate is TechEmpower's page; html/template escapes each message (contextual escaping: HTML
// text here). Its name, for a framework that looks templates up by name (Gin's c.HTML), is "fortunes".
var FortunesTemplate = template.Must(template.New("fortunes").Parse(
	`<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>` +
		`{{range .}}<tr><td>{{.ID}}</td><td>{{.Message}}</td></tr>{{end}}</table></body></html>`))

// Queries is TechEmpower's clamp of a queries/count parameter's text: missing or non-numeric is 1, then
// 1..500.
func Queries(value string) int {
	n, err := strconv.Atoi(value)
	if err != nil || n < 1 {
		return 1
	}
	return min(n, maxQueries)
}

func randomID() int32 { return int32(rand.IntN(worldRows) + 1) }

// DB is the pool and the copy of World taken at start for /cached-queries, indexed by id.
type DB struct {
	pool  *pgxpool.Pool
	cache []World
}

// Connect opens the pool and reads World for the cache (the server starts after the fixture is loaded).
func Connect(url string, poolSize int) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(poolSize)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cache := make([]World, worldRows+1)
	rows, _ := pool.Query(ctx, "SELECT id, randomnumber FROM world")
	var w World
	if _, err := pgx.ForEachRow(rows, []any{&w.ID, &w.RandomNumber}, func() error {
		if w.ID < 1 || w.ID > worldRows {
			return fmt.Errorf("world has id %d outside 1..%d", w.ID, worldRows)
		}
		cache[w.ID] = w
		return nil
	}); err != nil {
		pool.Close()
		return nil, fmt.Errorf("reading world for the cache: %w", err)
	}
	return &DB{pool: pool, cache: cache}, nil
}

// ReadWorlds reads n random rows, each by its own query (TechEmpower forbids one IN (...) query).
func (db *DB) ReadWorlds(ctx context.Context, n int) ([]World, error) {
	rows := make([]World, n)
	for i := range rows {
		if err := db.pool.QueryRow(ctx, "SELECT id, randomnumber FROM world WHERE id = $1", randomID()).
			Scan(&rows[i].ID, &rows[i].RandomNumber); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// UpdateWorlds reads n random rows as ReadWorlds does, gives each a new random number and writes them back.
func (db *DB) UpdateWorlds(ctx context.Context, n int) ([]World, error) {
	rows, err := db.ReadWorlds(ctx, n)
	if err != nil {
		return nil, err
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
	if _, err := db.pool.Exec(ctx, "UPDATE world SET randomnumber = v.n FROM unnest($1::int[], $2::int[]) AS v(id, n) WHERE world.id = v.id", ids, numbers); err != nil {
		return nil, err
	}
	return rows, nil
}

// CachedWorlds is n random rows from the copy of World taken at start.
func (db *DB) CachedWorlds(n int) []World {
	rows := make([]World, n)
	for i := range rows {
		rows[i] = db.cache[randomID()]
	}
	return rows
}

// Fortunes is every fortune plus the one added per request, sorted by message (byte order), for
// FortunesTemplate.
func (db *DB) Fortunes(ctx context.Context) ([]Fortune, error) {
	rows, _ := db.pool.Query(ctx, "SELECT id, message FROM fortune")
	fortunes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Fortune])
	if err != nil {
		return nil, err
	}
	fortunes = append(fortunes, Fortune{0, "Additional fortune added at request time."})
	slices.SortFunc(fortunes, func(a, b Fortune) int { return strings.Compare(a.Message, b.Message) })
	return fortunes, nil
}
