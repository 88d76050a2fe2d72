module github.com/fairrelay/fairrelay/migration

go 1.26.0
