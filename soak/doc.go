// Package soak is fairrelay's soak test: the whole system as real processes
// on real stores, killed at random for a while, then drained and checked.
//
// [Run] starts a receiver ('relayctl receive', HTTP, signed), four relays
// ('relayctl relay --to URL') and two producers (this package's [Produce],
// run as a child process) over one queue and one receiver: queue.db and
// receiver.db (SQLite, the default), or two fresh PostgreSQL schemas given
// to relayctl as postgres://…?schema=NAME URLs (Config.Backend
// BackendPostgres), dropped when the run ends; on PostgreSQL, with
// Config.PrivateCluster, on a cluster of the run's own
// (pgtest.NewCluster) that it may restart. While the chaos lasts, a loop
// sends SIGKILL to a random one of them every 50 to 500 ms (math/rand
// seeded with Config.Seed, so a run can be replayed) and each killed
// process is started again after a short pause; the receiver comes back
// on the same port. Another loop injects database and network faults one
// at a time (Config.Faults, faults.go): sessions terminated, the private
// cluster restarted fast or immediate, and, through a [FaultProxy] between
// every process and the server and another between the relays and the
// receiver, connections cut, blackholed or delayed. No process is
// restarted for a fault: one that was up must ride it out. When the chaos
// ends, the relays that lived through it must deliver everything by
// themselves (the recovery); then relays are started once more with
// --exit-when-idle and the run waits, under a watchdog, until they exit.
// With Config.Retention (PostgreSQL) the relays and the receiver prune
// what their retention window no longer keeps, all along.
//
// [Check] then reads the final state and checks the guarantees of
// docs/contract.md under crashes, the same code for both backends: it
// reads the stores through queue.Store and receiver.Store, and asks the
// backend (stores.go) only what no contract method says, the storage's
// integrity and the order receipts were committed in: every event a producer was told was
// committed is in the queue; every event in the queue was accepted by the
// receiver exactly once under its flow and sequence number; each flow's
// receipts were committed in the order 1..n and its total is the sum of the
// deltas enqueued; nothing is pending or in flight; the only quarantined
// events are the injected failures (a delta above the receiver's maximum,
// answered 400 invalid_body on every attempt, each alone in its flow); the
// audit is empty; and both stores pass their integrity check (PRAGMA
// integrity_check; on PostgreSQL amcheck's bt_index_check on every index).
// On PostgreSQL the receipts' commit order is recorded by a deferred
// trigger the soak adds to the receiver's schema (pgCommitLog), and every
// event inserted by a trigger on the queue's (pgEnqueueLog): both logs
// outlive the stores' pruning, so the check also sees what retention
// deleted.
//
// The truth about what was enqueued is the queue itself. A producer logs
// each batch only after its commit returned (fsync'd), and a restarted
// producer re-sends the batch after its last logged one: enqueue is
// idempotent by event ID, so a batch committed just before a kill comes back
// as duplicates. Check regenerates every logged batch and finds each of its
// events in the queue, and no producer more than one batch ahead of its log.
//
// The command is github.com/fairrelay/fairrelay/soak/cmd/soak; it prints one
// summary line and exits 1 on any failure:
//
//	go run ./soak/cmd/soak                 # CI length: 45 s of chaos, then the drain
//	SOAK_FOR=30m go run ./soak/cmd/soak    # a long run
//	SOAK_SEED=42 go run ./soak/cmd/soak    # replay a seed
//	FAIRRELAY_BACKEND=postgres go run ./soak/cmd/soak   # on a private PostgreSQL cluster, every fault
//	SOAK_FAULTS=kill,db-cut go run ./soak/cmd/soak -backend postgres -retention 30s
//
// With Config.Shards N (the command's -shards N or $SOAK_SHARDS, the
// tests' -soak.shards N) the run's queue is a sharded queue of N shards
// (docs/scale.md), which every process and the check take as one queue.
package soak
