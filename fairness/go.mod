module github.com/fairrelay/fairrelay/fairness

go 1.26.0
