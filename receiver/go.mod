module github.com/fairrelay/fairrelay/receiver

go 1.26.0
