package shard_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/shard"
)

// newDestSet is a labeled set of two shards with the destination "hooks"
// registered at tick 2.
func newDestSet(t *testing.T, b backend) (*shard.Store, []queue.Store) {
	t.Helper()
	s, shards := newSet(t, b, 2, nil)
	d := queue.Destination{Name: "hooks", URL: "http://127.0.0.1:9/h", Secrets: []string{"k1"}}
	if err := s.PutDestination(context.Background(), d, "second receiver", 2); err != nil {
		t.Fatal(err)
	}
	return s, shards
}

// hooksPaused reads whether "hooks" is paused, and why, through s.
func hooksPaused(t *testing.T, s queue.DestinationStore) (bool, string) {
	t.Helper()
	ds, err := s.Destinations(context.Background())
	if err != nil || len(ds) != 1 || ds[0].Name != "hooks" {
		t.Fatalf("Destinations = %+v, %v; want hooks alone", ds, err)
	}
	return ds[0].Paused, ds[0].PauseReason
}

// ahead moves shard i's clock mark to now with an enqueue into that shard
// alone, so that a queue-wide write below now stops at shard i.
func ahead(t *testing.T, shards []queue.Store, i int, id string, now clock.Tick) {
	t.Helper()
	enqueue(t, shards[i], id, flowsIn(i, len(shards), 1, "ahead")[0], now)
}

// TestPauseDestinationFinishes: a pause that stopped part way (shard 1's
// clock was ahead) is finished by the same call again, which skips shard
// 0, paused already; a pause of a destination paused in every shard is
// ErrDestinationPaused, as on one queue.
func TestPauseDestinationFinishes(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, shards := newDestSet(t, b)
		ahead(t, shards, 1, "a1", 5)
		err := s.PauseDestination(ctx, "hooks", "receiver down", 3)
		var se *shard.ShardError
		if !errors.As(err, &se) || se.Shard != 1 || !slices.Equal(se.Done, []int{0}) || !errors.Is(err, queue.ErrTimeRegression) {
			t.Fatalf("pause with shard 1 ahead = %v, want a ShardError of shard 1 after shard 0, ErrTimeRegression", err)
		}
		if err := s.PauseDestination(ctx, "hooks", "receiver down", 6); err != nil {
			t.Fatalf("the same pause again = %v, want nil (it finishes the pause)", err)
		}
		for i, sh := range shards {
			if p, why := hooksPaused(t, sh.(queue.DestinationStore)); !p || why != "receiver down" {
				t.Errorf("shard %d: hooks paused %v (%q), want paused (receiver down)", i, p, why)
			}
		}
		err = s.PauseDestination(ctx, "hooks", "again", 7)
		if !errors.Is(err, queue.ErrDestinationPaused) || errors.As(err, &se) {
			t.Errorf("pause of a destination paused in every shard = %v, want one queue's ErrDestinationPaused", err)
		}
		if err := s.PauseDestination(ctx, "nope", "x", 7); !errors.Is(err, queue.ErrUnknownDestination) {
			t.Errorf("pause of an unknown destination = %v, want ErrUnknownDestination", err)
		}
	})
}

// TestResumeDestinationFinishes: a resume that stopped part way leaves the
// destination listed as paused (shard 1 still has it paused); the same
// call again finishes it, and a resume of a destination paused in no shard
// is ErrDestinationNotPaused, as on one queue.
func TestResumeDestinationFinishes(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, shards := newDestSet(t, b)
		for _, sh := range shards {
			if err := sh.(queue.DestinationStore).PauseDestination(ctx, "hooks", "receiver down", 3); err != nil {
				t.Fatal(err)
			}
		}
		ahead(t, shards, 1, "a1", 5)
		err := s.ResumeDestination(ctx, "hooks", "receiver back", 4)
		var se *shard.ShardError
		if !errors.As(err, &se) || se.Shard != 1 || !slices.Equal(se.Done, []int{0}) || !errors.Is(err, queue.ErrTimeRegression) {
			t.Fatalf("resume with shard 1 ahead = %v, want a ShardError of shard 1 after shard 0, ErrTimeRegression", err)
		}
		if p, why := hooksPaused(t, s); !p || why != "receiver down" {
			t.Errorf("hooks resumed in shard 0 only: listed paused %v (%q), want paused (receiver down)", p, why)
		}
		if err := s.ResumeDestination(ctx, "hooks", "receiver back", 6); err != nil {
			t.Fatalf("the same resume again = %v, want nil (it finishes the resume)", err)
		}
		for i, sh := range shards {
			if p, _ := hooksPaused(t, sh.(queue.DestinationStore)); p {
				t.Errorf("shard %d: hooks still paused", i)
			}
		}
		if p, _ := hooksPaused(t, s); p {
			t.Errorf("hooks resumed in every shard: listed paused")
		}
		err = s.ResumeDestination(ctx, "hooks", "again", 7)
		if !errors.Is(err, queue.ErrDestinationNotPaused) || errors.As(err, &se) {
			t.Errorf("resume of a destination paused in no shard = %v, want one queue's ErrDestinationNotPaused", err)
		}
	})
}

// TestDestinationPauseOneShard: on one shard a pause or resume answers
// exactly as the shard alone.
func TestDestinationPauseOneShard(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := newSet(t, b, 1, nil)
		d := queue.Destination{Name: "hooks", URL: "http://127.0.0.1:9/h", Secrets: []string{"k1"}}
		if err := s.PutDestination(ctx, d, "second receiver", 2); err != nil {
			t.Fatal(err)
		}
		if err := s.PauseDestination(ctx, "hooks", "receiver down", 3); err != nil {
			t.Fatal(err)
		}
		var se *shard.ShardError
		if err := s.PauseDestination(ctx, "hooks", "again", 4); !errors.Is(err, queue.ErrDestinationPaused) || errors.As(err, &se) {
			t.Errorf("second pause = %v, want ErrDestinationPaused", err)
		}
		if err := s.ResumeDestination(ctx, "hooks", "receiver back", 5); err != nil {
			t.Fatal(err)
		}
		if err := s.ResumeDestination(ctx, "hooks", "again", 6); !errors.Is(err, queue.ErrDestinationNotPaused) || errors.As(err, &se) {
			t.Errorf("second resume = %v, want ErrDestinationNotPaused", err)
		}
	})
}

// TestRegisteredDestinationsReadShard0: RegisteredDestinations reads shard
// 0 alone, which PutDestination writes first: a change that stopped part
// way (shard 1's clock was ahead) is listed with its new settings, and the
// same call again brings shard 1 to them.
func TestRegisteredDestinationsReadShard0(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, shards := newDestSet(t, b)
		ahead(t, shards, 1, "a1", 5)
		d := queue.Destination{Name: "hooks", URL: "http://127.0.0.1:9/new", Secrets: []string{"k2", "k1"}, Concurrency: 3}
		var se *shard.ShardError
		if err := s.PutDestination(ctx, d, "new url", 3); !errors.As(err, &se) || se.Shard != 1 {
			t.Fatalf("put with shard 1 ahead = %v, want a ShardError of shard 1", err)
		}
		got, err := s.RegisteredDestinations(ctx)
		if err != nil || len(got) != 1 || got[0].URL != d.URL || !slices.Equal(got[0].Secrets, d.Secrets) || got[0].Concurrency != 3 {
			t.Fatalf("RegisteredDestinations = %+v, %v; want hooks with the new settings", got, err)
		}
		if err := s.PutDestination(ctx, d, "new url", 6); err != nil {
			t.Fatalf("the same put again = %v", err)
		}
		for i, sh := range shards {
			l, err := sh.(queue.DestinationStore).RegisteredDestinations(ctx)
			if err != nil || len(l) != 1 || l[0].URL != d.URL {
				t.Errorf("shard %d: RegisteredDestinations = %+v, %v; want hooks at the new URL", i, l, err)
			}
		}
	})
}
