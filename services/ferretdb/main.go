// ferretdb-netarena: FerretDB v1.24.2 (a MongoDB wire-protocol server) embedded through its library package.
//
// Why a program of our own: `go install github.com/FerretDB/FerretDB/cmd/ferretdb@v1.24.2` builds a binary
// that panics at start, because the module zip lacks the generated build/version/version.txt. The library
// package `ferretdb` needs no such file, so this ~50-line wrapper is the whole server: it listens on
// 127.0.0.1:-port, stores into PostgreSQL (-handler postgresql, -postgresql-url) or into SQLite files
// (-handler sqlite, -sqlite-dir), and stops cleanly on SIGTERM or SIGINT (the orchestrator's stop signal).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	port := flag.Int("port", 27017, "TCP port on 127.0.0.1")
	handler := flag.String("handler", "postgresql", "storage handler: postgresql or sqlite")
	pgURL := flag.String("postgresql-url", "", "PostgreSQL URL (handler postgresql)")
	sqliteDir := flag.String("sqlite-dir", "", "directory of the SQLite files (handler sqlite)")
	logLevel := flag.String("log-level", "warn", "debug, info, warn or error")
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "ferretdb-netarena: -log-level: %s\n", err)
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	config := &ferretdb.Config{
		Listener: ferretdb.ListenerConfig{TCP: fmt.Sprintf("127.0.0.1:%d", *port)},
		Logger:   logger,
		Handler:  *handler,
	}
	switch *handler {
	case "postgresql":
		if *pgURL == "" {
			fmt.Fprintln(os.Stderr, "ferretdb-netarena: -handler postgresql needs -postgresql-url")
			os.Exit(2)
		}
		config.PostgreSQLURL = *pgURL
	case "sqlite":
		if *sqliteDir == "" {
			fmt.Fprintln(os.Stderr, "ferretdb-netarena: -handler sqlite needs -sqlite-dir")
			os.Exit(2)
		}
		// FerretDB wants a URI naming a directory, with the trailing slash.
		config.SQLiteURL = "file:" + *sqliteDir + "/"
	default:
		fmt.Fprintf(os.Stderr, "ferretdb-netarena: -handler %q: use postgresql or sqlite\n", *handler)
		os.Exit(2)
	}

	f, err := ferretdb.New(config)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ferretdb-netarena: %s\n", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// MongoDBURI() may block until Run has bound the listener, so the address is printed from the flag.
	fmt.Fprintf(os.Stderr, "ferretdb-netarena: serving mongodb://%s/ (handler %s)\n", config.Listener.TCP, *handler)
	if err := f.Run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "ferretdb-netarena: %s\n", err)
		os.Exit(1)
	}
}
