module github.com/fairrelay/fairrelay/crashpoint

go 1.26.0
