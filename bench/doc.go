// Package bench measures fairrelay's stores side by side with the storage
// ceiling (raw one-row durable commits), with maragu.dev/goqite and with River,
// on the same machine, the same pragmas and in the same run.
//
// Every figure it reports is a rate measured in repeated, interleaved rounds:
// each round runs every case for the same wall-clock slice, one case after the
// other, so that the noise of a shared machine falls on all of them alike.
// Ratios are taken within a round and summarized as a median and a range over
// the rounds. Nothing here asserts a speed: the tests check that the harness
// counts correctly, and cmd/benchrun writes the report. cmd/relayprobe is an
// instrument, not a report: it times every queue call, receive batch and
// handler run of one relay runtime case (RuntimeProbe), or single
// transactions by kind and size (TxCosts), to show where a runtime row's
// time goes.
//
// The PostgreSQL rows (pg.go, pgdrain.go) measure pgqueuestore the same way,
// each case in a schema of its own that it drops, against River v0.51.2
// (river.go: riverpgxv5 on PostgreSQL, riversqlite on SQLite, River's own
// `river bench` settings); with no server they are skipped, never failed.
//
// This module is the only one that depends on goqite and River, so no core
// module carries what it is compared with.
package bench
