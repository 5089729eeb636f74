package main

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
)

// mongoHandler serves GET /mongo/{name}: one FindOne by _id per request on one shared client (its pool at the
// driver's default of 100 connections), as go-net does. The driver connects lazily, on the first query.
func mongoHandler(url string) (fasthttp.RequestHandler, error) {
	// The URL names the database (mongodb://host:port/netarena), as for every contestant.
	cs, err := connstring.ParseAndValidate(url)
	if err != nil {
		return nil, err
	}
	if cs.Database == "" {
		return nil, errors.New("the mongo URL names no database (mongodb://host:port/DATABASE)")
	}
	client, err := mongo.Connect(options.Client().ApplyURI(url))
	if err != nil {
		return nil, err
	}
	docs := client.Database(cs.Database).Collection("docs")
	return func(ctx *fasthttp.RequestCtx) {
		name := strings.TrimPrefix(string(ctx.Path()), "/mongo/")
		queryCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Raw BSON, rendered by the driver's own JSON writer in relaxed mode (plain numbers, field order kept):
		// encoding/json cannot render the driver's bson.D nested documents as objects.
		raw, err := docs.FindOne(queryCtx, bson.D{{Key: "_id", Value: name}}).Raw()
		if errors.Is(err, mongo.ErrNoDocuments) {
			ctx.NotFound()
			return
		}
		if err != nil {
			ctx.Error("database error: "+err.Error(), fasthttp.StatusInternalServerError)
			return
		}
		body, err := bson.MarshalExtJSON(raw, false, false)
		if err != nil {
			ctx.Error("rendering the document: "+err.Error(), fasthttp.StatusInternalServerError)
			return
		}
		ctx.SetContentType("application/json")
		ctx.SetBody(body)
	}, nil
}
