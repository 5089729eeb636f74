package main

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"netarena/contestants/techempower"
)

// TechEmpower's database scenarios (/db, /queries, /fortunes, /updates, /cached-queries): the queries and the
// fortunes template are contestants/_go-shared/techempower's (shared with go-net); Gin renders the JSON
// (c.JSON) and the fortunes page (c.HTML with that html/template set on the engine).

// TechEmpower requires a Server header on these answers; net/http adds Date itself.
const serverName = "go-gin"

func dbError(c *gin.Context, err error) {
	c.String(http.StatusInternalServerError, "database error: %v", err)
}

func addPostgres(r *gin.Engine, url string, poolSize int) error {
	db, err := techempower.Connect(url, poolSize)
	if err != nil {
		return err
	}
	queries := func(c *gin.Context, name string) int { return techempower.Queries(c.Query(name)) }
	r.SetHTMLTemplate(techempower.FortunesTemplate)
	tfb := r.Group("/", func(c *gin.Context) { c.Header("Server", serverName) })
	tfb.GET("/db", func(c *gin.Context) {
		rows, err := db.ReadWorlds(c.Request.Context(), 1)
		if err != nil {
			dbError(c, err)
			return
		}
		c.JSON(http.StatusOK, rows[0])
	})
	tfb.GET("/queries", func(c *gin.Context) {
		rows, err := db.ReadWorlds(c.Request.Context(), queries(c, "queries"))
		if err != nil {
			dbError(c, err)
			return
		}
		c.JSON(http.StatusOK, rows)
	})
	tfb.GET("/updates", func(c *gin.Context) {
		rows, err := db.UpdateWorlds(c.Request.Context(), queries(c, "queries"))
		if err != nil {
			dbError(c, err)
			return
		}
		c.JSON(http.StatusOK, rows)
	})
	tfb.GET("/cached-queries", func(c *gin.Context) {
		c.JSON(http.StatusOK, db.CachedWorlds(queries(c, "count")))
	})
	tfb.GET("/fortunes", func(c *gin.Context) {
		fortunes, err := db.Fortunes(c.Request.Context())
		if err != nil {
			dbError(c, err)
			return
		}
		c.HTML(http.StatusOK, "fortunes", fortunes)
	})
	return nil
}
