module netarena/contestants/go-net

// 1.25 or later: the mongo driver v2.10 requires it (main.go also relies on ServeMux patterns, 1.22+).
go 1.25.0

require go.mongodb.org/mongo-driver/v2 v2.10.0

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/xdg-go/scram v1.4.0 // indirect
	github.com/xdg-go/stringprep v1.0.4 // indirect
	github.com/youmark/pkcs8 v0.0.0-20240726163527-a2c0da244d78 // indirect
	golang.org/x/crypto v0.54.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

// TechEmpower's database scenarios, shared with go-gin; pgx v5.12.0, which it requires, is pinned by go.sum.
// The install's stamp covers that folder (contestant.toml: install.build_inputs).
require (
	github.com/jackc/pgx/v5 v5.12.0 // indirect
	netarena/contestants/techempower v0.0.0
)

replace netarena/contestants/techempower => ../_go-shared/techempower

// How the HTTP server is served over each protocol, shared with go-gin: the standard library only.
require netarena/contestants/httpserve v0.0.0

replace netarena/contestants/httpserve => ../_go-shared/httpserve
