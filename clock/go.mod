module github.com/fairrelay/fairrelay/clock

go 1.26.0
