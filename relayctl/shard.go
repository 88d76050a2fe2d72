package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/shard"
)

// A sharded queue (docs/contract.md §7.10, docs/scale.md) is addressed by
// the same --queue as a plain one:
//
//   - SQLite: --queue DIR, a directory holding shard-000.db, shard-001.db,
//     … shard-(N-1).db, one complete queue file per shard. A --queue that
//     is a directory of shard files is a sharded queue; a file is a plain
//     one; any other directory is refused as before.
//   - PostgreSQL: --queue 'postgres://…?schema=BASE', where the schemas
//     BASE_s000 … BASE_s(N-1) exist. A plain schema BASE and shard schemas
//     of the same BASE at once are refused as ambiguous.
//
// Discovery takes every member it finds; shard.Open then checks each
// member's label (index, count, epoch), so a set with a missing or extra
// shard, or a shard left over from another epoch, is refused with
// ErrShardLabel. `relayctl shards create` makes a new set.

// shardFile is the file name of shard i in a SQLite sharded queue's
// directory.
func shardFile(i int) string { return fmt.Sprintf("shard-%03d.db", i) }

// shardSchema is the schema of shard i of a PostgreSQL sharded queue whose
// base schema is base.
func shardSchema(base string, i int) string { return fmt.Sprintf("%s_s%03d", base, i) }

// shardFileRE matches a shard's file name and captures its index.
var shardFileRE = regexp.MustCompile(`^shard-([0-9]{3})\.db$`)

// errNotSharded says a --queue names no sharded queue.
var errNotSharded = errors.New("not a sharded queue")

// shardSet is an opened sharded queue: its members in index order and how
// they are named, with the pool they share on PostgreSQL.
type shardSet struct {
	// names are the members' file paths (SQLite) or schemas (PostgreSQL),
	// as messages show them.
	names   []string
	members []queue.Store
	pool    *pgxpool.Pool
	pg      bool
	// dir is a SQLite set's directory; base a PostgreSQL set's base schema.
	dir, base string
	// lock, when set, is the hold on the set that 'relayctl relay' keeps
	// for its life, so that an offline reshard sees it (shardlock.go).
	lock io.Closer
	// closed says close has run: closing again does nothing.
	closed bool
}

// close closes every member, then the lock and the pool. Closing again
// does nothing (a set may be closed by a failed step and again by its
// command's deferred close).
func (s *shardSet) close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for i, m := range s.members {
		if m == nil {
			continue
		}
		if err := m.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close shard %s: %w", s.names[i], err))
		}
	}
	// The lock before the pool: a PostgreSQL hold is a connection of the
	// pool, and the pool's Close waits for every connection to come back.
	if s.lock != nil {
		if err := s.lock.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.pool != nil {
		s.pool.Close()
	}
	return errors.Join(errs...)
}

// shardedLib is a sharded queue as one queueLib: the shard.Store over the
// members, which Close closes with the set.
type shardedLib struct {
	*shard.Store
	set *shardSet
}

// Close closes the members, the pool and any lock.
func (s shardedLib) Close() error { return errors.Join(s.Store.Close(), s.set.close()) }

// shardMode is how a sharded queue's members are opened.
type shardMode struct {
	// readOnly opens SQLite members read-only (read commands).
	readOnly bool
	// src and skew, when src is set, open every member in real time.
	src  clock.Source
	skew clock.Tick
	// minConns raises the PostgreSQL pool's size (the relay), beyond one
	// connection per shard for its LISTEN and one for the hold.
	minConns int32
	// extraConns is added to minConns once the shards are counted.
	extraConns int32
	// hold takes the shared hold of a writer (shardlock.go); read-only
	// opens take none.
	hold bool
	// exclusive takes a reshard's hold on a PostgreSQL set before it is
	// found (a SQLite set's is taken by the caller, before the open).
	exclusive bool
	// watch is what the process does when a PostgreSQL hold is lost.
	watch holdWatch
}

// errReshardUnderWay is a writer's refusal of a set being resharded.
var errReshardUnderWay = errors.New("a reshard of this queue is under way (it holds the queue's lock); try again when it has ended")

// sqliteShardFiles lists the shard files of dir in index order. A gap in
// the numbering (shard-001.db missing beside shard-000.db and
// shard-002.db) is refused here, by name; the labels are checked by
// shard.Open.
func sqliteShardFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	idx := map[int]string{}
	for _, en := range ents {
		m := shardFileRE.FindStringSubmatch(en.Name())
		if m == nil || en.IsDir() {
			continue
		}
		i, _ := strconv.Atoi(m[1])
		idx[i] = filepath.Join(dir, en.Name())
	}
	if len(idx) == 0 {
		return nil, fmt.Errorf("%w: %s holds no %s", errNotSharded, dir, shardFile(0))
	}
	return contiguous(idx, func(i int) string { return filepath.Join(dir, shardFile(i)) })
}

// contiguous returns the names of idx in index order, refusing a gap.
func contiguous(idx map[int]string, name func(int) string) ([]string, error) {
	keys := make([]int, 0, len(idx))
	for k := range idx {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	out := make([]string, 0, len(keys))
	for want, k := range keys {
		if k != want {
			return nil, fmt.Errorf("%w: shard %s is missing (found %d shards up to %s)",
				queue.ErrShardLabel, name(want), len(keys), name(keys[len(keys)-1]))
		}
		out = append(out, idx[k])
	}
	return out, nil
}

// isShardDir reports whether a --queue value names a directory that holds
// shard files (a SQLite sharded queue). Any other directory is refused as
// a queue as it always was: it is not a database file.
func (e *env) isShardDir(path string) bool {
	if path == "" || isPostgres(path) {
		return false
	}
	ents, err := os.ReadDir(e.abs(path))
	if err != nil {
		return false
	}
	for _, en := range ents {
		if shardFileRE.MatchString(en.Name()) && !en.IsDir() {
			return true
		}
	}
	return false
}

// openSQLiteShards opens the members of the sharded queue in dir.
func openSQLiteShards(dir string, m shardMode) (*shardSet, error) {
	files, err := sqliteShardFiles(dir)
	if err != nil {
		return nil, err
	}
	set := &shardSet{names: files, dir: dir}
	if m.hold {
		h, err := holdSQLite(dir, false)
		if errors.Is(err, errHeld) {
			return nil, errReshardUnderWay
		}
		if err != nil {
			return nil, err
		}
		set.lock = h
	}
	for _, f := range files {
		var opts []queuestore.Option
		if m.readOnly {
			opts = append(opts, queuestore.WithReadOnly())
		}
		if m.src != nil {
			opts = append(opts, queuestore.WithRealTime(m.src, m.skew))
		}
		s, err := queuestore.Open(f, opts...)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("shard %s: %w", f, err), set.close())
		}
		set.members = append(set.members, s)
	}
	return set, nil
}

// pgShardSchemas finds the shard schemas of base on the server of pool,
// in index order, and whether a plain schema base exists too.
func pgShardSchemas(ctx context.Context, pool *pgxpool.Pool, base string) (shards []string, plain bool, err error) {
	rows, err := pool.Query(ctx, `SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)`, base)
	if err != nil {
		return nil, false, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, false, err
	}
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(base) + `_s([0-9]{3})$`)
	idx := map[int]string{}
	for _, n := range names {
		if n == base {
			plain = true
			continue
		}
		if m := re.FindStringSubmatch(n); m != nil {
			i, _ := strconv.Atoi(m[1])
			idx[i] = n
		}
	}
	if len(idx) == 0 {
		return nil, plain, nil
	}
	shards, err = contiguous(idx, func(i int) string { return shardSchema(base, i) })
	return shards, plain, err
}

// openPGShards opens the sharded queue of a postgres:// --queue value, or
// returns errNotSharded when the server has no shard schemas of its base
// schema.
//
// A writer's pool (m.hold) takes the hold shared on every connection it
// makes (pgGuard), and a reshard's (m.exclusive) takes it exclusive on one
// before anything else: either way the set is found and opened under the
// hold.
func openPGShards(ctx context.Context, raw string, m shardMode) (*shardSet, error) {
	var guard *pgGuard
	var configure func(*pgxpool.Config, string)
	if m.hold {
		configure = func(cfg *pgxpool.Config, base string) {
			guard = newPGGuard(base, m.watch)
			guard.install(cfg)
		}
	}
	pool, base, err := pgOpenWith(ctx, raw, pgqueuestore.DefaultSchema, "queue", "queue", true, m.minConns+m.extraConns, configure)
	if err != nil {
		return nil, err
	}
	var hold *pgHold
	release := func() {
		if hold != nil {
			hold.Close() // always nil
		}
		pool.Close()
	}
	fail := func(err error) (*shardSet, error) {
		release()
		return nil, err
	}
	if m.exclusive {
		if hold, err = holdPG(ctx, pool, base, true); err != nil {
			return fail(err) // errHeld: the caller says who holds it
		}
		hold.keep(m.watch, nil)
	}
	schemas, plain, err := pgShardSchemas(ctx, pool, base)
	if errors.Is(err, errHeld) {
		return fail(errReshardUnderWay)
	}
	if err != nil {
		return fail(fmt.Errorf("connect: %w", err))
	}
	if len(schemas) == 0 {
		return fail(fmt.Errorf("%w: no schema %s", errNotSharded, shardSchema(base, 0)))
	}
	if plain {
		return fail(fmt.Errorf("%w: both a plain queue schema %s and shard schemas %s… exist; rename one of them",
			queue.ErrShardLabel, base, shardSchema(base, 0)))
	}
	if extra := int32(len(schemas)) + 1; m.minConns > 0 && m.extraConns < extra && !strings.Contains(raw, "pool_max_conns") {
		// One connection per shard for its LISTEN and one for the hold,
		// beyond what the caller asked for: open the pool again, larger.
		release()
		m.extraConns = extra
		return openPGShards(ctx, raw, m)
	}
	if m.hold {
		if hold, err = holdPG(ctx, pool, base, false); errors.Is(err, errHeld) {
			return fail(errReshardUnderWay)
		} else if err != nil {
			return fail(err)
		}
		if err := hold.with(ctx, func(c *pgx.Conn) error { return guard.arm(ctx, c) }); err != nil {
			return fail(fmt.Errorf("lock: %w", err))
		}
		hold.keep(m.watch, guard)
	}
	set := &shardSet{names: schemas, pool: pool, pg: true, base: base}
	if hold != nil {
		set.lock = hold
	}
	for _, sc := range schemas {
		opts := []pgqueuestore.Option{pgqueuestore.WithSchema(sc)}
		if m.src != nil {
			opts = append(opts, pgqueuestore.WithRealTime(m.src, m.skew))
		}
		s, err := pgqueuestore.OpenPool(ctx, pool, opts...)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("shard %s: %w", sc, err), set.close())
		}
		set.members = append(set.members, s)
	}
	return set, nil
}

// openShards opens the sharded queue of --queue, or returns errNotSharded.
func (e *env) openShards(m shardMode) (*shardSet, error) {
	m.watch = e.holdWatch()
	if isPostgres(e.queuePath) {
		return openPGShards(e.ctx, e.queuePath, m)
	}
	if !e.isShardDir(e.queuePath) {
		return nil, errNotSharded
	}
	return openSQLiteShards(e.abs(e.queuePath), m)
}

// shardedStore opens the sharded queue of --queue as one store, checking
// every member's label (shard.Open). errNotSharded: --queue is not one.
func (e *env) shardedStore(m shardMode) (shardedLib, error) {
	set, err := e.openShards(m)
	if err != nil {
		return shardedLib{}, err
	}
	s, err := openSet(e.ctx, set)
	if err != nil {
		return shardedLib{}, errors.Join(err, set.close())
	}
	return shardedLib{Store: s, set: set}, nil
}

// openSet is shard.Open over set's members, with the refusal said in
// terms of the members' names.
func openSet(ctx context.Context, set *shardSet) (*shard.Store, error) {
	s, err := shard.Open(ctx, set.members, shard.Options{})
	if err != nil {
		var se *shard.ShardError
		if errors.As(err, &se) && se.Shard >= 0 && se.Shard < len(set.names) {
			return nil, fmt.Errorf("shard %s: %w", set.names[se.Shard], err)
		}
		return nil, err
	}
	return s, nil
}

// shardedQueueDB is the *queueDB of a sharded --queue; errNotSharded when
// it is not one. Real time opens every member again.
func (e *env) shardedQueueDB(readOnly bool) (*queueDB, error) {
	s, err := e.shardedStore(shardMode{readOnly: readOnly, hold: !readOnly})
	if err != nil {
		return nil, err
	}
	reopen := func(old queueLib, src clock.Source, skew clock.Tick) (queueLib, error) {
		if err := old.Close(); err != nil {
			return nil, err
		}
		return e.shardedStore(shardMode{src: src, skew: skew, readOnly: readOnly, hold: !readOnly})
	}
	return &queueDB{s: s, reopen: reopen}, nil
}

// partway explains a queue-wide write (policy, destinations) that a
// sharded queue refused after some shards had taken it (shard.Store writes
// them in index order): those shards changed, so the explanation must not
// say that nothing did. nil when no shard had changed.
func partway(q *queueDB, err error) error {
	var se *shard.ShardError
	s, ok := q.sharded()
	if !ok || !errors.As(err, &se) || len(se.Done) == 0 {
		return nil
	}
	name := func(i int) string {
		if i >= 0 && i < len(s.set.names) {
			return s.set.names[i]
		}
		return strconv.Itoa(i)
	}
	done := make([]string, len(se.Done))
	for k, i := range se.Done {
		done[k] = name(i)
	}
	return fmt.Errorf("shard %s refused (%w) after %s had changed; the shards differ until the same command succeeds on every one (leave out --now to act at the highest mark)",
		name(se.Shard), se.Err, strings.Join(done, ", "))
}

// sharded returns q's store as a sharded one, ok false for a plain queue.
func (q *queueDB) sharded() (shardedLib, bool) {
	s, ok := q.s.(shardedLib)
	return s, ok
}

// shardSnapshot is one shard's part of 'relayctl snapshot' on a sharded
// queue: where the shard is, its label, and its snapshot.
type shardSnapshot struct {
	Store    string           `json:"store"`
	Label    queue.ShardLabel `json:"label"`
	Snapshot queue.Snapshot   `json:"snapshot"`
}

// shardedSnapshot is what 'relayctl snapshot' prints as the queue of a
// sharded queue.
type shardedSnapshot struct {
	Shards []shardSnapshot `json:"shards"`
}

// shardSnapshots reads every shard's snapshot, in shard order.
func shardSnapshots(ctx context.Context, s shardedLib) (shardedSnapshot, error) {
	out := shardedSnapshot{Shards: make([]shardSnapshot, 0, len(s.set.members))}
	for i, m := range s.set.members {
		l, _, err := shard.Label(ctx, m)
		if err != nil {
			return shardedSnapshot{}, fmt.Errorf("shard %s: %w", s.set.names[i], err)
		}
		snap, err := m.Snapshot(ctx)
		if err != nil {
			return shardedSnapshot{}, fmt.Errorf("shard %s: %w", s.set.names[i], err)
		}
		out.Shards = append(out.Shards, shardSnapshot{Store: s.set.shown(i), Label: l, Snapshot: snap})
	}
	return out, nil
}

// shown is member i's name as output shows it: a file's base name, a
// schema's name.
func (s *shardSet) shown(i int) string {
	if s.pg {
		return s.names[i]
	}
	return filepath.Base(s.names[i])
}

// errShardMember refuses an enqueue into one shard of a sharded queue
// opened alone: the event might belong to another shard.
var errShardMember = errors.New("enqueue through the sharded queue (its directory, or its base schema), so that each flow lands in its own shard")

// refuseShardMember refuses q, opened as a plain queue by enqueue, when it
// is a shard of a sharded queue. Other commands may open one shard alone
// (a relay per shard, docs/scale.md): only an enqueue could put a flow in
// the wrong shard.
func refuseShardMember(ctx context.Context, q *queueDB, shownPath string) error {
	m, ok := q.s.(queue.ShardMember)
	if !ok {
		return nil
	}
	l, labeled, err := m.ShardLabel(ctx)
	if err != nil {
		return fmt.Errorf("read the shard label of %s: %w", shownPath, err)
	}
	if labeled {
		return fmt.Errorf("%s is shard %d of %d (epoch %d) of a sharded queue: %w; nothing changed", shownPath, l.Index, l.Count, l.Epoch, errShardMember)
	}
	return nil
}
