package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/shard"
)

// cmdReshard is `relayctl reshard --to M --reason R`: the offline change of
// a sharded queue's number of shards (docs/contract.md §7.10,
// docs/scale.md, "Resharding").
func cmdReshard(e *env, args []string) (err error) {
	f := newFlags(e, "reshard", "reshard --queue DIR|postgres://…?schema=BASE --to M --reason TEXT [--force] [--now TICK]",
		"Reshard moves every flow of a sharded queue into a new set of M shards, offline, losing and\n"+
			"doubling nothing (docs/scale.md): it copies the policy, destinations and queue-wide audit,\n"+
			"moves each flow whole (events, sequence numbers, attempts, leases, served count, weight,\n"+
			"pause, audit) to the shard its name hashes to among M, checks the counts, and labels the new\n"+
			"set with the next epoch, audited with the reason in every new shard. Then it swaps: the old\n"+
			"set is kept as the backup (SQLite: DIR.before-epoch-K; PostgreSQL: schemas\n"+
			"BASE_before_epoch_K_sNNN) and the new one takes the queue's name.\n\n"+
			"It refuses to start while any relay, console or other writer has the queue open (they hold\n"+
			"the queue's lock; --force does not override this), and while an event's lease is live\n"+
			"(a relay that just stopped may still settle it), unless --force: a live lease is moved as it\n"+
			"is and expires in the new set like any lease.").withQueue().withNow()
	to := f.Int("to", 0, "the new number of shards `M`, 1.."+strconv.Itoa(queue.MaxShards))
	reason := f.String("reason", "", "why the queue is resharded (required; kept in each new shard's audit)")
	force := f.Bool("force", false, "reshard even while events have live leases")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usagef("unexpected argument %q", pos[0])
	case !f.isSet("to"):
		return usagef("--to M is required: the new number of shards")
	case *to < 1 || *to > queue.MaxShards:
		return usagef("--to %d: want 1..%d", *to, queue.MaxShards)
	case *reason == "":
		return usagef("--reason is required: say why the queue is resharded (it is kept in the audit)")
	}
	if !isPostgres(e.queuePath) && !e.isShardDir(e.queuePath) {
		if err := e.mustExist(e.queuePath, "queue", "queue"); err != nil {
			return err
		}
		return fmt.Errorf("queue %s is a single file, not a sharded queue (a directory of shard files): nothing changed", e.queuePath)
	}

	// The exclusive hold first, before the set is found, so that no writer
	// opens the set while it is moved: SQLite's here, PostgreSQL's on the
	// set's pool as it opens (shardMode.exclusive), where it is checked
	// while the reshard runs and the swap commits in its session.
	heldBy := func() error {
		return fmt.Errorf("a relay, console or other writer has queue %s open (it holds the queue's lock); stop it first (--force does not override this): nothing changed", shown(e.queuePath))
	}
	if !isPostgres(e.queuePath) {
		hold, herr := holdSQLite(e.abs(e.queuePath), true)
		if errors.Is(herr, errHeld) {
			return heldBy()
		} else if herr != nil {
			return herr
		}
		defer closeWith(hold, &err)
	}
	from, err := e.shardedStore(shardMode{exclusive: true})
	if errors.Is(err, errHeld) {
		return heldBy()
	}
	if errors.Is(err, errNotSharded) {
		return fmt.Errorf("queue %s is not a sharded queue (%v): nothing changed", shown(e.queuePath), err)
	}
	if err != nil {
		return fmt.Errorf("open sharded queue %s: %w", shown(e.queuePath), err)
	}
	fromOpen := true
	defer func() {
		if fromOpen {
			closeWith(from, &err)
		}
	}()
	epoch, n := from.Epoch(), from.Count()
	now, err := e.tickOf(e.ctx, from, f.now)
	if err != nil {
		return err
	}
	live, example, err := liveLeases(e.ctx, from.set, now)
	if err != nil {
		return err
	}
	if live > 0 && !*force {
		return fmt.Errorf("%d event(s) have a live lease at tick %d (%s, for one): a relay may still settle them. "+
			"Wait until the leases expire (or stop the relay that holds them), or give --force: nothing changed", live, now, example)
	}
	before, err := from.Stats(e.ctx)
	if err != nil {
		return fmt.Errorf("read the queue's stats: %w", err)
	}

	names := e.reshardNames(from.set, epoch)
	if err := names.free(e.ctx, from.set); err != nil {
		return err
	}
	next, err := names.create(e, from.set, *to)
	if err != nil {
		// create removed what it had made.
		return fmt.Errorf("%w (the queue is unchanged)", err)
	}
	swapped := false
	defer func() {
		if !swapped {
			// A failure before the swap: the new set is this run's own and
			// holds nothing the queue lacks, so it is removed (closed
			// first, unless it is already).
			closeWith(closer(next.close), &err)
			if rerr := names.discard(e.ctx, from.set, next); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
	}()
	rep, err := shard.Reshard(e.ctx, from.set.members, next.members, *reason, now)
	if err != nil {
		return fmt.Errorf("reshard %s: %w (the queue is unchanged)", shown(e.queuePath), err)
	}
	after, err := statsOf(e.ctx, next)
	if err != nil {
		return err
	}
	// Close both sets (checkpointing SQLite's WAL into the files), then
	// swap the names. On PostgreSQL the old set's pool, which the new set
	// shares, stays open until the swap has committed: removing the new
	// set after a failed swap needs it.
	if err := next.close(); err != nil {
		return fmt.Errorf("close the new set %s: %w (the queue is unchanged)", names.next, err)
	}
	if from.set.pg {
		// The hold is released with the set's pool (Close below), after
		// the swap.
		if err := names.swapPG(e.ctx, from.set.lock.(*pgHold), n, *to); err != nil {
			return err
		}
		swapped = true
	}
	fromOpen = false
	if err := from.Close(); err != nil {
		if !swapped {
			return fmt.Errorf("close the old set: %w (the queue is unchanged)", err)
		}
		return fmt.Errorf("close the old set: %w", err)
	}
	if !from.set.pg {
		if swapped, err = names.swapSQLite(); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stdout, "resharded %s: %d shards (epoch %d) -> %d shards (epoch %d): %d flows, %d events "+
		"(%d pending, %d in flight, %d quarantined, %d acked) moved; flows per shard %v; the old set is kept as %s\n",
		shown(e.queuePath), n, epoch, rep.To, rep.Epoch, rep.Flows, rep.Events,
		after.Events.Pending, after.Events.Inflight, after.Events.Quarantined, after.Events.Acked, rep.FlowsPerShard, names.aside)
	if after.Flows != before.Flows || after.Events != before.Events {
		return fmt.Errorf("the new set's counts differ from the old one's (%+v, was %+v): check it before relaying", after, before)
	}
	return nil
}

// statsOf is the summed Stats of a set's members.
func statsOf(ctx context.Context, set *shardSet) (queue.Stats, error) {
	var sum queue.Stats
	for i, m := range set.members {
		st, err := m.Stats(ctx)
		if err != nil {
			return queue.Stats{}, fmt.Errorf("shard %s: %w", set.names[i], err)
		}
		sum.Flows += st.Flows
		sum.Events.Pending += st.Events.Pending
		sum.Events.Inflight += st.Events.Inflight
		sum.Events.Quarantined += st.Events.Quarantined
		sum.Events.Acked += st.Events.Acked
	}
	return sum, nil
}

// liveLeases counts the in-flight events of set whose lease is live at now
// (LeaseUntil after now), and names one. Only a shard with events in
// flight is read further, and there only the flows whose head is in
// flight: an offline step, not a hot path.
func liveLeases(ctx context.Context, set *shardSet, now clock.Tick) (n int, example string, err error) {
	for i, m := range set.members {
		st, err := m.Stats(ctx)
		if err != nil {
			return 0, "", fmt.Errorf("shard %s: %w", set.names[i], err)
		}
		if st.Events.Inflight == 0 {
			continue
		}
		flows, err := m.Flows(ctx)
		if err != nil {
			return 0, "", fmt.Errorf("shard %s: %w", set.names[i], err)
		}
		for _, fl := range flows {
			if fl.HeadState != queue.StateInflight {
				continue
			}
			evs, err := m.FlowEvents(ctx, fl.Flow)
			if err != nil {
				return 0, "", fmt.Errorf("shard %s: %w", set.names[i], err)
			}
			for _, ev := range evs {
				if ev.State == queue.StateInflight && ev.LeaseUntil > now {
					if n == 0 {
						example = fmt.Sprintf("event %q of flow %q until tick %d", ev.ID, ev.Flow, ev.LeaseUntil)
					}
					n++
				}
			}
		}
	}
	return n, example, nil
}

// reshardNames are the names a reshard of one queue uses: the new set's
// while it is filled, and the old set's once moved aside.
type reshardNames struct {
	// SQLite: directories (as given and absolute).
	dir, next, aside  string
	nextAbs, asideAbs string
	// PostgreSQL: base schemas.
	base, nextBase, asideBase string
}

// reshardNames picks the names for a reshard of set at epoch.
func (e *env) reshardNames(set *shardSet, epoch int64) reshardNames {
	if set.pg {
		return reshardNames{
			base: set.base, nextBase: set.base + "_next", asideBase: fmt.Sprintf("%s_before_epoch_%d", set.base, epoch),
			next: shardSchema(set.base+"_next", 0) + "…", aside: shardSchema(fmt.Sprintf("%s_before_epoch_%d", set.base, epoch), 0) + "…",
		}
	}
	q := trimSeparators(e.queuePath)
	next, aside := q+reshardingSuffix, fmt.Sprintf("%s%s%d", q, beforeEpochInfix, epoch)
	return reshardNames{dir: set.dir, next: next, aside: aside,
		nextAbs: e.abs(next), asideAbs: e.abs(aside)}
}

// The SQLite side paths of a reshard of the queue directory DIR: the new
// set is built in DIR.resharding, the old one is moved aside to
// DIR.before-epoch-K.
const (
	reshardingSuffix = ".resharding"
	beforeEpochInfix = ".before-epoch-"
)

// trimSeparators is path without trailing separators (but "/" stays).
func trimSeparators(path string) string {
	for len(path) > 1 && os.IsPathSeparator(path[len(path)-1]) {
		path = path[:len(path)-1]
	}
	return path
}

// refuseReshardLeftover refuses to create a new queue at path (as given)
// while a reshard's side paths for it exist: a reshard interrupted between
// the two renames of its swap leaves no queue at path, and a queue created
// there would hold events outside both sets and block renaming one of
// them back.
func (e *env) refuseReshardLeftover(path string) error {
	q := trimSeparators(path)
	var left []string
	if _, err := os.Lstat(e.abs(q + reshardingSuffix)); err == nil {
		left = append(left, q+reshardingSuffix)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	ents, err := os.ReadDir(filepath.Dir(e.abs(q)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	prefix := filepath.Base(q) + beforeEpochInfix
	for _, en := range ents {
		k, ok := strings.CutPrefix(en.Name(), prefix)
		if !ok {
			continue
		}
		if _, err := strconv.ParseInt(k, 10, 64); err == nil {
			left = append(left, q+beforeEpochInfix+k)
		}
	}
	if len(left) == 0 {
		return nil
	}
	return fmt.Errorf("queue %s does not exist, but a reshard left %s beside it (a reshard interrupted in its swap "+
		"leaves the old set as %s%sK and the new one as %s%s): rename one of them back to %s, or move them away "+
		"to start a new queue there (docs/scale.md, \"Resharding\"); nothing changed",
		path, strings.Join(left, ", "), q, beforeEpochInfix, q, reshardingSuffix, q)
}

// free refuses names already taken (a failed reshard's leftover, an
// earlier backup of the same epoch).
func (r reshardNames) free(ctx context.Context, set *shardSet) error {
	if !set.pg {
		for _, p := range [][2]string{{r.nextAbs, r.next}, {r.asideAbs, r.aside}} {
			if _, err := os.Stat(p[0]); !errors.Is(err, fs.ErrNotExist) {
				if err == nil {
					return fmt.Errorf("%s already exists (a failed reshard's new set, or an earlier backup): move it away first; nothing changed", p[1])
				}
				return err
			}
		}
		return nil
	}
	for _, b := range []string{r.nextBase, r.asideBase} {
		have, plain, err := pgShardSchemas(ctx, set.pool, b)
		if err != nil && !errors.Is(err, queue.ErrShardLabel) {
			return fmt.Errorf("connect: %w", err)
		}
		if len(have) > 0 || plain || err != nil {
			return fmt.Errorf("schemas %s… already exist (a failed reshard's new set, or an earlier backup): drop or rename them first; nothing changed", shardSchema(b, 0))
		}
		if len(shardSchema(b, queue.MaxShards-1)) > pgqueuestore.MaxSchemaLen {
			return fmt.Errorf("schema %s would be longer than %d bytes: the base schema is too long to reshard in place; nothing changed", shardSchema(b, 0), pgqueuestore.MaxSchemaLen)
		}
	}
	return nil
}

// create makes the new set's m empty members. When it fails part way it
// removes the members it made, and only those: it leaves nothing behind.
func (r reshardNames) create(e *env, set *shardSet, m int) (*shardSet, error) {
	if !set.pg {
		// createSQLiteShards removes the directory it made when it fails.
		return createSQLiteShards(r.nextAbs, m)
	}
	// free found none of the new set's names; the pool is the old set's,
	// which closes it.
	return createPGSchemas(e.ctx, set.pool, r.nextBase, m)
}

// discard removes the new set of a reshard that failed before its swap,
// even when ctx is cancelled (Ctrl-C), and says what is left when it
// cannot.
func (r reshardNames) discard(ctx context.Context, set, next *shardSet) error {
	if err := r.remove(context.WithoutCancel(ctx), set, next); err != nil {
		return fmt.Errorf("remove the new set %s: %w (remove it before trying again)", r.next, err)
	}
	return nil
}

// remove deletes the new set of a reshard that failed before its swap.
func (r reshardNames) remove(ctx context.Context, set, next *shardSet) error {
	if !set.pg {
		return os.RemoveAll(r.nextAbs)
	}
	return dropSchemas(ctx, set.pool, next.names)
}

// dropSchemas drops the schemas named, with what they hold.
func dropSchemas(ctx context.Context, pool *pgxpool.Pool, names []string) error {
	var errs []error
	for _, sc := range names {
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{sc}.Sanitize()+" CASCADE"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// swapSQLite moves the old directory aside and the new one into its place.
// Between the two renames the queue's directory does not exist: a command
// run then finds no queue, and changes nothing (enqueue and shards create,
// which make a new queue, refuse while the side paths exist:
// refuseReshardLeftover). begun says the first
// rename was done: from then on both sets are left for the operator when
// the second fails; before it, the queue is unchanged and the caller
// removes the new set.
func (r reshardNames) swapSQLite() (begun bool, err error) {
	if err := os.Rename(r.dir, r.asideAbs); err != nil {
		return false, fmt.Errorf("move the old set aside: %w (the queue is unchanged)", err)
	}
	if err := os.Rename(r.nextAbs, r.dir); err != nil {
		return true, fmt.Errorf("move the new set into place: %w (the old set is %s, the new one %s: rename one of them back)", err, r.aside, r.next)
	}
	return true, nil
}

// swapPG renames the old schemas aside and the new ones into place, in one
// transaction: every other session sees the old set or the new one. The
// transaction runs in the session of hold, the reshard's exclusive hold:
// it commits only if that session, and so the lock, lasted from before the
// old set was read until the commit, so that no writer can have written
// into the old set since the copy (docs/contract.md §7.10).
func (r reshardNames) swapPG(ctx context.Context, hold *pgHold, n, m int) error {
	err := hold.with(ctx, func(c *pgx.Conn) error { return r.swapOn(ctx, c, n, m) })
	if errors.Is(err, errHoldLost) {
		return fmt.Errorf("swap the schemas: %w (the queue is unchanged)", err)
	}
	return err
}

// swapOn is swapPG's transaction on c.
func (r reshardNames) swapOn(ctx context.Context, c *pgx.Conn, n, m int) error {
	tx, err := c.Begin(ctx)
	if err != nil {
		return fmt.Errorf("swap the schemas: %w (the queue is unchanged)", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, a no-op
	rename := func(from, to string) error {
		_, err := tx.Exec(ctx, "ALTER SCHEMA "+pgx.Identifier{from}.Sanitize()+" RENAME TO "+pgx.Identifier{to}.Sanitize())
		return err
	}
	for i := range n {
		if err := rename(shardSchema(r.base, i), shardSchema(r.asideBase, i)); err != nil {
			return fmt.Errorf("swap the schemas: %w (the queue is unchanged)", err)
		}
	}
	for i := range m {
		if err := rename(shardSchema(r.nextBase, i), shardSchema(r.base, i)); err != nil {
			return fmt.Errorf("swap the schemas: %w (the queue is unchanged)", err)
		}
	}
	for i := range n {
		if err := fixSearchPath(ctx, tx, shardSchema(r.asideBase, i)); err != nil {
			return fmt.Errorf("swap the schemas: %w (the queue is unchanged)", err)
		}
	}
	for i := range m {
		if err := fixSearchPath(ctx, tx, shardSchema(r.base, i)); err != nil {
			return fmt.Errorf("swap the schemas: %w (the queue is unchanged)", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		// A failed commit may have reached the server before the
		// connection failed: the swap is then done, and its new set's
		// working names are gone (removing them drops nothing).
		return fmt.Errorf("swap the schemas: commit: %w (the queue is unchanged unless the commit took effect before the connection failed: 'relayctl shards' shows its epoch)", err)
	}
	return nil
}

// fixSearchPath points every function of schema that sets its own
// search_path (pgqueuestore's trigger functions name their schema there,
// not in their bodies) at schema's new name, pg_temp: ALTER SCHEMA RENAME
// changes the functions' schema but not the text of their settings, which
// would otherwise name the old schema (or, after a swap, the other set's).
func fixSearchPath(ctx context.Context, tx pgx.Tx, schema string) error {
	rows, err := tx.Query(ctx, `SELECT p.oid::regprocedure::text FROM pg_proc p
		WHERE p.pronamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1)
		AND EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%')`, schema)
	if err != nil {
		return err
	}
	fns, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, fn := range fns {
		// fn is regprocedure's text: already quoted and schema-qualified
		// as the server needs it.
		if _, err := tx.Exec(ctx, "ALTER FUNCTION "+fn+" SET search_path = "+pgx.Identifier{schema}.Sanitize()+", pg_temp"); err != nil {
			return fmt.Errorf("function %s: %w", fn, err)
		}
	}
	return nil
}
