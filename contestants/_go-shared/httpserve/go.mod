module netarena/contestants/httpserve

// As go-net and go-gin, which build it through a replace directive. The standard library only.
go 1.25.0
