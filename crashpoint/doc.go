// Package crashpoint makes a process die at a named point, so that a test can
// prove what survives a crash.
//
// A crash point is a place inside an operation where a real process may stop
// between two steps: [EnqueueSeqTaken], [ClaimCommitted], [ReceiveBeforeCommit],
// [ReceiveCommitted], [SettleBeforeCommit] and [RedriveBeforeAudit] (docs/contract.md §4).
// A CHILD process is armed through the environment variable [EnvVar]; the parent
// builds that entry with [Env], which refuses an unknown name. The child reads it
// once with [FromEnv], which also refuses an unknown name ([ErrUnknownPoint]),
// and passes every point it reaches to [Trap.Hit]. When the point reached is the
// armed one, the process calls os.Exit([ExitCode]) at once: no deferred
// function runs, no transaction is committed or rolled back by Go, exactly as
// if the process had been killed there.
//
// The zero [Trap] is unarmed and Hit on it is a single comparison, so the stores'
// hooks cost nothing in a normal run. The stores do not import this package:
// they expose hook points, and the experiment maps those hooks onto these
// points in its child processes. A parent test process never arms a trap.
//
// The package imports nothing outside the standard library.
package crashpoint
