package shard_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/shard"
)

// TestReshard moves a loaded 2-shard SQLite queue to 3 SQLite shards,
// then to 1 PostgreSQL shard (a move across engines), and checks after each
// that every flow and every event is there exactly once, as it was:
// sequence numbers, states, generations, attempts, history, served
// counts, weights, the pause and the redrive.
func TestReshard(t *testing.T) {
	ctx := context.Background()
	s2, _ := newSet(t, backends[0], 2, nil)
	now := loaded(t, s2)
	if err := s2.SetWeight(ctx, "flow-03", 4, "heavier", now); err != nil {
		t.Fatal(err)
	}
	hooks := queue.Destination{Name: "hooks", URL: "http://127.0.0.1:9/h", Secrets: []string{"k1", "k2"}, Concurrency: 3}
	if err := s2.PutDestination(ctx, hooks, "second receiver", now); err != nil {
		t.Fatal(err)
	}
	if err := s2.PauseDestination(ctx, "hooks", "maintenance", now); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Enqueue(ctx, queue.Event{ID: "h1", Flow: "to-hooks", Body: []byte("{}"), Destination: "hooks"}, now); err != nil {
		t.Fatal(err)
	}
	want := readAll(t, s2)
	if len(want.Events) != 74 {
		t.Fatalf("loaded %d events, want 74", len(want.Events))
	}
	to3 := sqliteSet(t, 3, nil)
	r, err := shard.Reshard(ctx, s2.Shards(), to3, "grow", now+1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Flows != 31 || r.Events != 74 || r.Epoch != 1 || r.To != 3 || r.FlowsPerShard[0]+r.FlowsPerShard[1]+r.FlowsPerShard[2] != 31 {
		t.Errorf("Report = %+v", r)
	}
	s3, err := shard.Open(ctx, to3, shard.Options{})
	if err != nil || s3.Epoch() != 1 {
		t.Fatalf("Open(new set) = epoch %v, %v", s3, err)
	}
	if got := readAll(t, s3); !reflect.DeepEqual(got, want) {
		t.Errorf("after 2 -> 3 the queue differs:\n got %+v\nwant %+v", got, want)
	}
	ds, err := s3.Destinations(ctx)
	if err != nil || len(ds) != 1 || !reflect.DeepEqual(ds[0].Secrets, hooks.Secrets) || ds[0].Concurrency != 3 || !ds[0].Paused || ds[0].Flows != 1 {
		t.Errorf("destinations after 2 -> 3 = %+v, %v; want hooks with its secrets, limit, pause and one flow", ds, err)
	}
	// The old set is kept, and a leftover old shard never mixes with the new.
	if got := readAll(t, s2); !reflect.DeepEqual(got, want) {
		t.Errorf("the old set changed")
	}
	if _, err := shard.Open(ctx, []queue.Store{to3[0], s2.Shards()[1], to3[2]}, shard.Options{}); !errors.Is(err, queue.ErrShardLabel) {
		t.Errorf("Open(mixed sets) error = %v, want ErrShardLabel", err)
	}
	// A new set that is not fresh is refused.
	if _, err := shard.Reshard(ctx, to3, s2.Shards(), "back", now+2); !errors.Is(err, queue.ErrShardLabel) {
		t.Errorf("Reshard into a labeled set error = %v, want ErrShardLabel", err)
	}
	to1 := pgSet(t, 1, nil)
	if _, err := shard.Reshard(ctx, to3, to1, "shrink", now+2); err != nil {
		t.Fatal(err)
	}
	s1, err := shard.Open(ctx, to1, shard.Options{})
	if err != nil || s1.Epoch() != 2 {
		t.Fatalf("Open(1 shard) = %v, %v", s1, err)
	}
	if got := readAll(t, s1); !reflect.DeepEqual(got, want) {
		t.Errorf("after 3 -> 1 (PostgreSQL) the queue differs:\n got %+v\nwant %+v", got, want)
	}
	// The moved queue goes on: draining it serves every event not acked
	// exactly once more, except those behind a quarantined head.
	if err := s1.ResumeFlow(ctx, "flow-07", "done", now+3); err != nil {
		t.Fatal(err)
	}
	if err := s1.ResumeDestination(ctx, "hooks", "done", now+3); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	tick := now + 3
	for k := 0; k < 200; k++ {
		cs, err := s1.ClaimBatch(ctx, tick, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			seen[c.EventID]++
			if _, err := s1.Settle(ctx, c.EventID, c.Generation, queue.Result{OK: true}, tick); err != nil {
				t.Fatal(err)
			}
		}
		tick += queue.BackoffCap + 1
	}
	blocked := map[string]bool{}
	for _, f := range want.Flows {
		blocked[f.Flow] = f.HeadState == queue.StateQuarantined
	}
	for id, e := range want.Events {
		if e.State == queue.StatePending && !blocked[e.Flow] && seen[id] != 1 {
			t.Errorf("pending event %s delivered %d times after the moves", id, seen[id])
		}
		if e.State == queue.StateAcked && seen[id] != 0 {
			t.Errorf("acked event %s delivered again", id)
		}
	}
}

// TestReshardUnsharded makes a sharded queue of a queue that never was.
func TestReshardUnsharded(t *testing.T) {
	ctx := context.Background()
	one := sqliteSet(t, 1, nil)
	for k := 0; k < 10; k++ {
		enqueue(t, one[0], string(rune('a'+k)), string(rune('a'+k)), 1)
	}
	want := readAll(t, one[0])
	to := sqliteSet(t, 2, nil)
	if _, err := shard.Reshard(ctx, one, to, "shard it", 2); err != nil {
		t.Fatal(err)
	}
	s, err := shard.Open(ctx, to, shard.Options{})
	if err != nil || s.Epoch() != 0 {
		t.Fatalf("Open = %v, %v", s, err)
	}
	if got := readAll(t, s); !reflect.DeepEqual(got, want) {
		t.Errorf("sharded queue differs:\n got %+v\nwant %+v", got, want)
	}
}
