package main

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
)

// addMongo registers GET /mongo/{name}: one FindOne by _id per request on one shared client (its pool at
// the driver's default of 100 connections). The driver connects lazily, on the first query.
func addMongo(mux *http.ServeMux, url string) error {
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
	mux.HandleFunc("GET /mongo/{name}", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		// Raw BSON, rendered by the driver's own JSON writer in relaxed mode (plain numbers, field order
		// kept): encoding/json cannot render bson.D nested documents as objects.
		raw, err := docs.FindOne(ctx, bson.D{{Key: "_id", Value: r.PathValue("name")}}).Raw()
		if errors.Is(err, mongo.ErrNoDocuments) {
			http.NotFound(w, r)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		body, err := bson.MarshalExtJSON(raw, false, false)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	return nil
}
