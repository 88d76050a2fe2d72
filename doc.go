//go:build !mage

// Package fairrelay is the root of the fairrelay workspace. It holds no code:
// each folder beside it is a Go module of its own, joined by go.work, and
// magefile.go (build tag mage) runs the project's targets. See README.md and
// docs/architecture.md.
//
// The modules:
//
//   - clock: logical ticks, the clock mark, wall and manual sources.
//   - fairness: the claim orders (MinServed, Rotation) as a pure model.
//   - crashpoint: named crash points for the experiment's child processes.
//   - writerlock: fair turns for the writers of one SQLite file.
//   - drivertx: write transactions on one driver connection.
//   - dbfile: checks of a database file before a store opens it.
//   - migration: numbered migration files and the shared migration tests.
//   - webhook: Standard Webhooks signatures.
//   - queue: the queue's vocabulary and store contract.
//   - receiver: the receiver's vocabulary and store contract.
//   - queuestore: the fair queue on SQLite.
//   - receiverstore: the idempotent receiver on SQLite.
//   - pgqueuestore: the fair queue on PostgreSQL.
//   - pgreceiverstore: the idempotent receiver on PostgreSQL.
//   - pgtest: the PostgreSQL server and schemas the tests use.
//   - conformance: one test per contract clause, for every backend.
//   - relay: the relay runtime, with HTTP and in-process delivery.
//   - inbox: the receiver server over HTTP, with group commit.
//   - console: the operator's web console.
//   - experiment: the contract's scenarios with golden snapshots.
//   - relayctl: the operator's command line and servers.
//   - bench: the benchmarks behind docs/performance.md.
//   - soak: the kill -9 soak over real processes.
//
// Its tests: layers_test.go checks the import rules between the modules
// (docs/architecture.md, "Import rules"); TestOutsideModule follows
// README.md's "Using the modules from your own Go module" as a user would:
// it builds and runs a module of its own beside this repository through a
// go.work, offline.
//
// This file also exists so that go vet ./... and go test ./... in the root
// module find a package instead of warning that they matched none.
package fairrelay
