package soak

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/shard"
)

// A sharded soak (Config.Shards N, docs/scale.md) runs every process on a
// queue of N shards, named as relayctl names them: on SQLite the
// directory queue/ of the run's directory with shard-000.db …, on
// PostgreSQL the schemas soak_<hex>_queue_s000 …. Stores.Queue is the name
// relayctl's --queue takes (the directory, or the URL of the base schema);
// queueMembers expands it into the shards' own names for what the soak
// does per store (the enqueue log, the integrity check, the drop).

// shardFileRE matches a shard file's name, as relayctl writes it.
var shardFileRE = regexp.MustCompile(`^shard-([0-9]{3})\.db$`)

// queueMembers returns the store names of the queue target: its shards'
// (SQLite files, or postgres:// URLs of their schemas) in index order
// when it is sharded, or target itself.
func queueMembers(ctx context.Context, target string) ([]string, bool, error) {
	if !isPostgres(target) {
		fi, err := os.Stat(target)
		if err != nil || !fi.IsDir() {
			return []string{target}, false, nil
		}
		ents, err := os.ReadDir(target)
		if err != nil {
			return nil, false, fmt.Errorf("soak: %w", err)
		}
		var out []string
		for _, en := range ents {
			if shardFileRE.MatchString(en.Name()) {
				out = append(out, filepath.Join(target, en.Name()))
			}
		}
		sort.Strings(out)
		return out, true, nil
	}
	conn, base, err := pgTarget(target)
	if err != nil {
		return nil, false, err
	}
	c, err := pgx.Connect(ctx, conn)
	if err != nil {
		return nil, false, fmt.Errorf("soak: find the queue's shards: %w", err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1) ORDER BY nspname`, base+"_s")
	if err != nil {
		return nil, false, fmt.Errorf("soak: find the queue's shards: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, false, fmt.Errorf("soak: find the queue's shards: %w", err)
	}
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(base) + `_s[0-9]{3}$`)
	var out []string
	for _, n := range names {
		if re.MatchString(n) {
			u, err := withSchema(conn, n)
			if err != nil {
				return nil, false, err
			}
			out = append(out, u)
		}
	}
	if len(out) == 0 {
		return []string{target}, false, nil
	}
	return out, true, nil
}

// shardTargets names the n shards of a new sharded queue target.
func shardTargets(target string, n int) ([]string, error) {
	out := make([]string, 0, n)
	for i := range n {
		if !isPostgres(target) {
			out = append(out, filepath.Join(target, fmt.Sprintf("shard-%03d.db", i)))
			continue
		}
		conn, base, err := pgTarget(target)
		if err != nil {
			return nil, err
		}
		u, err := withSchema(conn, fmt.Sprintf("%s_s%03d", base, i))
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// openShards opens each member with o and the set as one shard.Store,
// which closes them.
func openShards(ctx context.Context, members []string, o queueOptions, create bool) (queue.Store, error) {
	var shards []queue.Store
	closeAll := func() {
		for _, s := range shards {
			s.Close()
		}
	}
	for _, m := range members {
		var s queue.Store
		var err error
		if isPostgres(m) {
			s, err = openPGQueue(ctx, m, o)
		} else {
			s, err = openSQLiteQueue(m, o)
		}
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("shard %s: %w", redact(m), err)
		}
		shards = append(shards, s)
	}
	if create {
		if err := shard.Create(ctx, shards, "soak", clock.Tick(0)); err != nil {
			closeAll()
			return nil, err
		}
	}
	s, err := shard.Open(ctx, shards, shard.Options{CloseShards: true})
	if err != nil {
		closeAll()
		return nil, err
	}
	return s, nil
}

// createShardedQueue makes the n shards of target with policy p (the
// directory first, on SQLite) and labels them as one set.
func createShardedQueue(ctx context.Context, target string, n int, p queue.Policy) (queue.Store, error) {
	if !isPostgres(target) {
		if err := os.Mkdir(target, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("soak: %w", err)
		}
	}
	members, err := shardTargets(target, n)
	if err != nil {
		return nil, err
	}
	return openShards(ctx, members, queueOptions{policy: &p}, true)
}
