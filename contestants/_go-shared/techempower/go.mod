module netarena/contestants/techempower

// As go-net and go-gin, which build it through a replace directive (their go.sum pins pgx).
go 1.25.0

require github.com/jackc/pgx/v5 v5.12.0
