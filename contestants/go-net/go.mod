module netarena/contestants/go-net

// 1.22 or later: main.go relies on ServeMux method and {wildcard} patterns.
go 1.22
