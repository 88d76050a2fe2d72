module github.com/fairrelay/fairrelay/queue

go 1.26.0

require github.com/fairrelay/fairrelay/clock v0.0.0

replace github.com/fairrelay/fairrelay/clock => ../clock
