package main

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
)

// addMongo registers GET /mongo/:name: one FindOne by _id per request on one shared client (its pool at the
// driver's default of 100 connections), as go-net does. The driver connects lazily, on the first query.
func addMongo(r *gin.Engine, url string) error {
	// The URL names the database (mongodb://host:port/netarena), as for every contestant.
	cs, err := connstring.ParseAndValidate(url)
	if err != nil {
		return err
	}
	if cs.Database == "" {
		return errors.New("the mongo URL names no database (mongodb://host:port/DATABASE)")
	}
	client, err := mongo.Connect(options.Client().ApplyURI(url))
	if err != nil {
		return err
	}
	docs := client.Database(cs.Database).Collection("docs")
	r.GET("/mongo/:name", func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 30*time.Second)
		defer cancel()
		// Raw BSON, rendered by the driver's own JSON writer in relaxed mode (plain numbers, field order kept):
		// c.JSON's encoding/json cannot render the driver's bson.D nested documents as objects.
		raw, err := docs.FindOne(ctx, bson.D{{Key: "_id", Value: c.Param("name")}}).Raw()
		if errors.Is(err, mongo.ErrNoDocuments) {
			c.Status(http.StatusNotFound)
			return
		}
		if err != nil {
			c.String(http.StatusInternalServerError, "database error: %v", err)
			return
		}
		body, err := bson.MarshalExtJSON(raw, false, false)
		if err != nil {
			c.String(http.StatusInternalServerError, "rendering the document: %v", err)
			return
		}
		c.Data(http.StatusOK, "application/json", body)
	})
	return nil
}
