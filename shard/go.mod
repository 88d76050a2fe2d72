module github.com/fairrelay/fairrelay/shard

go 1.26.0

require (
	github.com/fairrelay/fairrelay/clock v0.0.0
	github.com/fairrelay/fairrelay/queue v0.0.0
)

replace github.com/fairrelay/fairrelay/clock => ../clock

replace github.com/fairrelay/fairrelay/queue => ../queue
