module github.com/fairrelay/fairrelay/bench

go 1.26.0

require (
	github.com/fairrelay/fairrelay/clock v0.0.0
	github.com/fairrelay/fairrelay/inbox v0.0.0
	github.com/fairrelay/fairrelay/pgqueuestore v0.0.0
	github.com/fairrelay/fairrelay/pgreceiverstore v0.0.0
	github.com/fairrelay/fairrelay/pgtest v0.0.0
	github.com/fairrelay/fairrelay/queue v0.0.0
	github.com/fairrelay/fairrelay/queuestore v0.0.0
	github.com/fairrelay/fairrelay/receiver v0.0.0
	github.com/fairrelay/fairrelay/receiverstore v0.0.0
	github.com/fairrelay/fairrelay/relay v0.0.0
	github.com/fairrelay/fairrelay/shard v0.0.0
	github.com/fairrelay/fairrelay/writerlock v0.0.0
	github.com/jackc/pgx/v5 v5.13.0
	github.com/riverqueue/river v0.51.2
	github.com/riverqueue/river/riverdriver v0.51.2
	github.com/riverqueue/river/riverdriver/riverpgxv5 v0.51.2
	github.com/riverqueue/river/riverdriver/riversqlite v0.51.2
	maragu.dev/goqite v0.4.0
	modernc.org/sqlite v1.62.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/fairrelay/fairrelay/dbfile v0.0.0 // indirect
	github.com/fairrelay/fairrelay/drivertx v0.0.0 // indirect
	github.com/fairrelay/fairrelay/fairness v0.0.0 // indirect
	github.com/fairrelay/fairrelay/migration v0.0.0 // indirect
	github.com/fairrelay/fairrelay/webhook v0.0.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/ncruces/go-strftime v1.1.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	github.com/riverqueue/river/rivershared v0.51.2 // indirect
	github.com/riverqueue/river/rivertype v0.51.2 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.2.0 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	golang.org/x/time v0.16.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	modernc.org/libc v1.80.1 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
)

replace github.com/fairrelay/fairrelay/clock => ../clock

replace github.com/fairrelay/fairrelay/fairness => ../fairness

replace github.com/fairrelay/fairrelay/queuestore => ../queuestore

replace github.com/fairrelay/fairrelay/receiverstore => ../receiverstore

replace github.com/fairrelay/fairrelay/writerlock => ../writerlock

replace github.com/fairrelay/fairrelay/drivertx => ../drivertx

replace github.com/fairrelay/fairrelay/dbfile => ../dbfile

replace github.com/fairrelay/fairrelay/relay => ../relay

replace github.com/fairrelay/fairrelay/webhook => ../webhook

replace github.com/fairrelay/fairrelay/queue => ../queue

replace github.com/fairrelay/fairrelay/receiver => ../receiver

replace github.com/fairrelay/fairrelay/pgqueuestore => ../pgqueuestore

replace github.com/fairrelay/fairrelay/pgtest => ../pgtest

replace github.com/fairrelay/fairrelay/pgreceiverstore => ../pgreceiverstore

replace github.com/fairrelay/fairrelay/inbox => ../inbox

replace github.com/fairrelay/fairrelay/migration => ../migration

replace github.com/fairrelay/fairrelay/shard => ../shard
