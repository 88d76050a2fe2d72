// Package shard splits one queue into N shards (docs/contract.md §7.10):
// N complete queues of §2, each its own SQLite file or PostgreSQL schema,
// every flow in exactly one of them by a stable hash of its name ([Of]).
//
// A [Store] composes the N shards' queue.Store values and is itself a
// queue.Store with every capability the shards have, so a relay, an
// operator command or the console treats a sharded queue as one queue.
// Every rule of §2–§3 holds inside a shard; across shards:
//
//   - The order of claims is not defined. Claims visit the shards in a
//     rotation (see [Store.ClaimBatch]); fairness across shards is
//     approximate, measured in docs/decisions/sharding.md.
//   - A batch enqueue, settle, extend or settle-and-claim is atomic per
//     shard only: a failure in one shard's part leaves the parts of the
//     shards before it committed, and the error ([ShardError]) says which.
//     A retry of the whole batch is harmless: what was committed comes
//     back Duplicate (enqueue) or Stale (settle), and an extension again
//     extends the same claim. Claims made in
//     the shards before a failing one are not returned: they come back
//     after their lease, as a crashed relay's would.
//   - Event IDs are unique per shard only: an ID reused in another flow
//     that hashes to another shard is not detected as ErrConflict, and a
//     settle, extend, redrive or read by that ID may reach either shard.
//   - A destination's Concurrency and Rate are enforced by each shard on
//     its own, so the whole queue's limit is N × the registered one. The
//     store registers the destination unchanged in every shard; an
//     operator who wants a total limit L registers ceil(L/N).
//   - SetPolicy, PutDestination and the other queue-wide writes go to
//     every shard in turn: a failure part way leaves the shards before it
//     changed, and the error says which; the same call again finishes it
//     (a destination pause or resume skips the shards that have it
//     already, and Destinations shows the destination paused while any
//     shard has it paused).
//
// The shard count N is recorded in every shard ([queue.ShardLabel]):
// [Create] labels a fresh set, [Open] refuses any set whose labels are not
// exactly {i, N, epoch}, and [Reshard] moves a queue offline to a new set
// with another N, losing and doubling nothing.
package shard
