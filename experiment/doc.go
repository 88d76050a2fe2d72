// Package experiment proves fairrelay's contract (docs/contract.md) on the real stores,
// with real SQLite files (or PostgreSQL schemas) and real OS processes.
//
// A [Scenario] is a named story in logical time: it runs in a fresh folder
// with its own queue.db and receiver.db, drives the stores through the
// [Relay] (claim, deliver, settle) or directly, and records named checks with
// their verdicts on its [Lab]. [Run] runs one scenario under a watchdog (20 s,
// 30 s with several processes) that only stops hangs; when the scenario is
// done and every child process has exited, it checks both files with PRAGMA
// integrity_check and takes both stores' full snapshots. [Scenarios] lists
// them all; each has a golden file testdata/<name>.golden.json written by
// [Marshal], the one stable marshalling shared by the tests, the check command
// and the output file.
//
// Child processes re-execute the running binary (the test binary or the
// experiment command), which calls [RunChildIfRequested] first thing: the job
// comes in [ChildEnv], the crash point in crashpoint.EnvVar. A crash child
// wires the stores' hooks to its crashpoint.Trap and exits with status 73 at
// its point; the parent asserts that status and then runs the recovery.
//
// The scenarios drive the stores through two small interfaces,
// [QueueStore] and [ReceiverStore], so the same scenario runs on either
// [Backend]: [SQLite] (files in the folder, the default) or [Postgres]
// (one schema per store, dropped afterwards), chosen by [BackendEnv] in the
// command and given to [RunOn]. Both backends are compared with the same
// golden files; on PostgreSQL a crash child's open transaction is rolled
// back by the server (docs/experiment.md "On PostgreSQL").
//
// Results never hold PIDs, temporary paths, durations or race winners; the
// one race (the eight-claimant run's tickets) is normalised with
// [Lab.Normalise] after named checks of what the race may decide. See
// docs/experiment.md for every scenario and the clause it proves.
package experiment
