module github.com/fairrelay/fairrelay/writerlock

go 1.26.0
