package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/shard"
	"github.com/jackc/pgx/v5/pgxpool"
)

// cmdShards is `shards` (list the shards of a sharded queue) and `shards
// create --count N` (make a new sharded queue).
func cmdShards(e *env, args []string) error {
	if len(args) > 0 && args[0] == "create" {
		return cmdShardsCreate(e, args[1:])
	}
	return cmdShardsList(e, args)
}

// shardRow is one line of `relayctl shards`.
type shardRow struct {
	Store       string `json:"store"`
	Index       int    `json:"index"`
	Count       int    `json:"count"`
	Epoch       int64  `json:"epoch"`
	Flows       int64  `json:"flows"`
	Pending     int64  `json:"pending"`
	Inflight    int64  `json:"inflight"`
	Quarantined int64  `json:"quarantined"`
	Acked       int64  `json:"acked"`
	ClockMark   int64  `json:"clock_mark"`
}

func cmdShardsList(e *env, args []string) (err error) {
	f := newFlags(e, "shards", "shards [--queue DIR|postgres://…?schema=BASE] [--json]",
		"Shards lists the shards of a sharded queue (docs/scale.md): each one's file or schema,\n"+
			"its label (index, count, epoch) and its events by state. The labels are checked\n"+
			"first: a set with a missing or extra shard, or one of another epoch, is refused.\n"+
			"'relayctl shards create --count N' makes a new sharded queue.").withQueue().withJSON()
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q (did you mean 'shards create'?)", pos[0])
	}
	if !isPostgres(e.queuePath) && !e.isShardDir(e.queuePath) {
		if err := e.mustExist(e.queuePath, "queue", "queue"); err != nil {
			return err
		}
		return fmt.Errorf("queue %s is a single file, not a sharded queue (a directory of shard files)", e.queuePath)
	}
	s, err := e.shardedStore(shardMode{readOnly: true})
	if errors.Is(err, errNotSharded) {
		return fmt.Errorf("queue %s is not a sharded queue (%v); 'relayctl shards create' makes one", shown(e.queuePath), err)
	}
	if err != nil {
		return fmt.Errorf("open sharded queue %s: %w", shown(e.queuePath), err)
	}
	defer closeWith(s, &err)
	rows := make([]shardRow, 0, len(s.set.members))
	for i, m := range s.set.members {
		l, _, err := shard.Label(e.ctx, m)
		if err != nil {
			return fmt.Errorf("shard %s: %w", s.set.names[i], err)
		}
		st, err := m.Stats(e.ctx)
		if err != nil {
			return fmt.Errorf("shard %s: %w", s.set.names[i], err)
		}
		rows = append(rows, shardRow{Store: s.set.shown(i), Index: l.Index, Count: l.Count, Epoch: l.Epoch,
			Flows: st.Flows, Pending: st.Events.Pending, Inflight: st.Events.Inflight,
			Quarantined: st.Events.Quarantined, Acked: st.Events.Acked, ClockMark: int64(st.ClockMark)})
	}
	if f.json {
		return writeJSON(e.stdout, rows)
	}
	t := newTable(e.stdout, "STORE", "SHARD", "EPOCH", "FLOWS", "PENDING", "INFLIGHT", "QUARANTINED", "ACKED", "CLOCK MARK")
	for _, r := range rows {
		t.row(r.Store, fmt.Sprintf("%d/%d", r.Index, r.Count), strconv.FormatInt(r.Epoch, 10), strconv.FormatInt(r.Flows, 10),
			strconv.FormatInt(r.Pending, 10), strconv.FormatInt(r.Inflight, 10), strconv.FormatInt(r.Quarantined, 10), strconv.FormatInt(r.Acked, 10),
			strconv.FormatInt(r.ClockMark, 10))
	}
	return t.flush()
}

func cmdShardsCreate(e *env, args []string) (err error) {
	f := newFlags(e, "shards create", "shards create --queue DIR|postgres://…?schema=BASE --count N [--reason TEXT]",
		"Shards create makes a new, empty sharded queue of N shards (docs/scale.md): on SQLite the\n"+
			"directory DIR with shard-000.db … shard-(N-1).db, on PostgreSQL the schemas BASE_s000 …\n"+
			"BASE_s(N-1). Each shard is labeled with its index, N and epoch 0, audited with the reason.\n"+
			"A directory or schema that already exists is refused: it changes nothing there.\n"+
			"Every command then takes the same --queue; 'relayctl reshard' changes N later.").withQueue().withNow()
	count := f.Int("count", 0, "number of shards `N`, 1.."+strconv.Itoa(queue.MaxShards))
	reason := f.String("reason", "relayctl shards create", "why the queue is sharded (kept in each shard's audit)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usagef("unexpected argument %q", pos[0])
	case !f.isSet("count"):
		return usagef("--count N is required: the number of shards")
	case *count < 1 || *count > queue.MaxShards:
		return usagef("--count %d: want 1..%d", *count, queue.MaxShards)
	case *reason == "":
		return usagef("--reason is empty")
	}
	now := f.now.tick
	if !f.now.set && e.clock.mode == clockWall {
		now = e.clock.wall.Now()
	}
	set, err := e.createShards(*count)
	if err != nil {
		return err
	}
	defer closeWith(closer(set.close), &err)
	if err := shard.Create(e.ctx, set.members, *reason, now); err != nil {
		return fmt.Errorf("label the new shards of %s: %w (the new %s stay; remove them before trying again)",
			shown(e.queuePath), err, set.what())
	}
	fmt.Fprintf(e.stdout, "created sharded queue %s: %d shards (%s … %s), epoch 0\n",
		shown(e.queuePath), *count, set.shown(0), set.shown(*count-1))
	return nil
}

// closer is a func as an io.Closer-like value for closeWith.
type closer func() error

func (c closer) Close() error { return c() }

// what names a set's members for messages: files or schemas.
func (s *shardSet) what() string {
	if s.pg {
		return "schemas"
	}
	return "files in " + s.dir
}

// createShards makes the members of a new set of n shards at --queue,
// refusing anything already there.
func (e *env) createShards(n int) (*shardSet, error) {
	if isPostgres(e.queuePath) {
		return e.createPGShards(e.queuePath, n, "")
	}
	if e.queuePath == "" {
		return nil, usagef("--queue is empty")
	}
	dir := e.abs(e.queuePath)
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		if err == nil {
			return nil, fmt.Errorf("%s already exists: shards create makes a new directory; nothing changed", e.queuePath)
		}
		return nil, err
	}
	if err := e.refuseReshardLeftover(e.queuePath); err != nil {
		return nil, err
	}
	return createSQLiteShards(dir, n)
}

// createSQLiteShards makes dir and n empty shard files in it; when it
// fails part way, it removes dir again.
func createSQLiteShards(dir string, n int) (*shardSet, error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	set := &shardSet{dir: dir}
	for i := range n {
		p := filepath.Join(dir, shardFile(i))
		s, err := queuestore.Open(p)
		if err != nil {
			// dir is this call's own (Mkdir made it): remove it with what
			// it holds, so that a failure leaves nothing behind.
			return nil, errors.Join(fmt.Errorf("create shard %s: %w", p, err), set.close(), os.RemoveAll(dir))
		}
		set.names = append(set.names, p)
		set.members = append(set.members, s)
	}
	return set, nil
}

// createPGShards makes n empty shard schemas of the base schema of raw
// (or of base, when given), refusing a base that has a plain schema or
// any shard schema already; when it fails part way, it drops the schemas
// it made, and only those.
func (e *env) createPGShards(raw string, n int, base string) (*shardSet, error) {
	pool, b, err := pgOpen(e.ctx, raw, pgqueuestore.DefaultSchema, "queue", "queue", true, 0)
	if err != nil {
		return nil, err
	}
	if base == "" {
		base = b
	}
	if len(shardSchema(base, n-1)) > pgqueuestore.MaxSchemaLen {
		pool.Close()
		return nil, usagef("schema %s would be longer than %d bytes: choose a shorter base schema", shardSchema(base, n-1), pgqueuestore.MaxSchemaLen)
	}
	have, plain, err := pgShardSchemas(e.ctx, pool, base)
	if err != nil && !errors.Is(err, queue.ErrShardLabel) {
		pool.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	if plain || len(have) > 0 || err != nil {
		pool.Close()
		what := "shard schemas " + shardSchema(base, 0) + "…"
		if plain {
			what = "a queue schema " + base
		}
		return nil, fmt.Errorf("%s already exist(s): shards create makes new schemas; nothing changed", what)
	}
	set, err := createPGSchemas(e.ctx, pool, base, n)
	if err != nil {
		pool.Close()
		return nil, err
	}
	set.pool = pool // the command's own: closed with the set
	return set, nil
}

// createPGSchemas makes the n empty shard schemas of base on pool, which
// the set it returns does not own (its pool is nil). When it fails part
// way it drops the schemas it made, and only those, even when ctx is
// cancelled (Ctrl-C): the schema whose creation failed was made in the
// transaction that failed, or by another session, and is not dropped.
// Its callers have checked that none of the names existed.
func createPGSchemas(ctx context.Context, pool *pgxpool.Pool, base string, n int) (*shardSet, error) {
	set := &shardSet{pg: true, base: base}
	for i := range n {
		sc := shardSchema(base, i)
		s, err := pgqueuestore.OpenPool(ctx, pool, pgqueuestore.WithSchema(sc))
		if err != nil {
			err = errors.Join(fmt.Errorf("create shard %s: %w", sc, err), set.close())
			if derr := dropSchemas(context.WithoutCancel(ctx), pool, set.names); derr != nil {
				err = errors.Join(err, fmt.Errorf("remove the new schemas %s…: %w (drop them before trying again)", shardSchema(base, 0), derr))
			}
			return nil, err
		}
		set.names = append(set.names, sc)
		set.members = append(set.members, s)
	}
	return set, nil
}

// tickOf reads the tick an operator step acts at on an opened set: --now
// when given, else this machine's clock when the queue runs in real time
// (its clock mark is Unix milliseconds, or --clock wall), else the clock
// mark.
func (e *env) tickOf(ctx context.Context, s shardedLib, now tickFlag) (clock.Tick, error) {
	if now.set {
		return now.tick, nil
	}
	mark, err := s.ClockMark(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the clock mark: %w", err)
	}
	if e.clock.wallAt(mark) {
		return max(e.clock.wall.Now(), mark), nil
	}
	return mark, nil
}
