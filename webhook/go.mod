module github.com/fairrelay/fairrelay/webhook

go 1.26.0
