package shard_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/shard"
)

// backend makes n fresh, unlabeled stores of one engine.
type backend struct {
	name string
	make func(t *testing.T, n int, p *queue.Policy) []queue.Store
}

func sqliteSet(t *testing.T, n int, p *queue.Policy) []queue.Store {
	t.Helper()
	dir := t.TempDir()
	out := make([]queue.Store, n)
	for i := range out {
		var opts []queuestore.Option
		if p != nil {
			opts = append(opts, queuestore.WithPolicy(*p))
		}
		s, err := queuestore.Open(filepath.Join(dir, fmt.Sprintf("shard-%d.db", i)), opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out[i] = s
	}
	return out
}

func pgSet(t *testing.T, n int, p *queue.Policy) []queue.Store {
	t.Helper()
	out := make([]queue.Store, n)
	for i := range out {
		url, schema := pgtest.Schema(t)
		opts := []pgqueuestore.Option{pgqueuestore.WithSchema(schema)}
		if p != nil {
			opts = append(opts, pgqueuestore.WithPolicy(*p))
		}
		s, err := pgqueuestore.Open(context.Background(), url, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out[i] = s
	}
	return out
}

var backends = []backend{{"sqlite", sqliteSet}, {"postgres", pgSet}}

// eachBackend runs fn as a subtest per backend.
func eachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}

// newSet creates and opens a labeled set of n shards.
func newSet(t *testing.T, b backend, n int, p *queue.Policy) (*shard.Store, []queue.Store) {
	t.Helper()
	ctx := context.Background()
	shards := b.make(t, n, p)
	if err := shard.Create(ctx, shards, "test set", 1); err != nil {
		t.Fatal(err)
	}
	s, err := shard.Open(ctx, shards, shard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s, shards
}

// flowIn returns k flow names that hash to shard i of n.
func flowsIn(i, n, k int, prefix string) []string {
	var out []string
	for j := 0; len(out) < k; j++ {
		f := fmt.Sprintf("%s%03d", prefix, j)
		if shard.Of(f, n) == i {
			out = append(out, f)
		}
	}
	return out
}

func enqueue(t *testing.T, s queue.Store, id, flow string, now clock.Tick) queue.Enqueued {
	t.Helper()
	r, err := s.Enqueue(context.Background(), queue.Event{ID: id, Flow: flow, Body: []byte(`{"id":"` + id + `"}`)}, now)
	if err != nil {
		t.Fatalf("Enqueue(%s, %s): %v", id, flow, err)
	}
	return r
}

// everything is what a queue holds, read through its Store: every flow
// and every event with its history, and the counts.
type everything struct {
	Flows  []queue.FlowState
	Events map[string]queue.EventState
	Counts queue.EventCounts
}

func readAll(t *testing.T, s queue.Store) everything {
	t.Helper()
	ctx := context.Background()
	fs, err := s.Flows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all := everything{Events: map[string]queue.EventState{}}
	for _, f := range fs {
		f.Position = 0
		all.Flows = append(all.Flows, f)
		evs, err := s.FlowEvents(ctx, f.Flow)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			full, err := s.Event(ctx, e.ID)
			if err != nil {
				t.Fatal(err)
			}
			if _, dup := all.Events[e.ID]; dup {
				t.Errorf("event %s read twice", e.ID)
			}
			all.Events[e.ID] = full
		}
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all.Counts = st.Events
	return all
}
