package soak

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
)

// newQueueTarget names a new queue on backend, for a producer: a file in a
// temporary directory, or a fresh schema dropped when t ends.
func newQueueTarget(t *testing.T, backend string) string {
	t.Helper()
	c := Config{Backend: backend, Dir: t.TempDir()}
	if backend == BackendPostgres {
		c.Postgres = pgtest.Require(t)
	}
	s, err := newStores(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dropStores(context.Background(), s); err != nil {
			t.Error(err)
		}
	})
	return s.Queue
}

// openTestQueue opens a queue, closed when t ends.
func openTestQueue(t *testing.T, target string) queue.Store {
	t.Helper()
	q, err := openQueue(context.Background(), target, queueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func TestProducer_ArgsRoundTrip(t *testing.T) {
	p := Producer{Queue: "/q.db", Log: "/p.log", ID: 3, Seed: -9, Flows: 17, Batch: 40, PoisonEvery: 25, Pause: 100 * time.Millisecond, MaxBacklog: 2000}
	got, err := ParseProducer(p.Args())
	if err != nil || got != p {
		t.Fatalf("ParseProducer(Args()) = %+v, %v; want %+v", got, err, p)
	}
	for _, bad := range [][]string{nil, {"-queue", "q", "-log", "l", "-id", "1", "-flows", "1", "-batch", "0"}, {"-nope"}} {
		if _, err := ParseProducer(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseProducer(%q) = %v, want ErrConfig", bad, err)
		}
	}
}

// A batch is the same every time it is generated (a restarted producer
// re-sends it byte for byte); poison events sit alone in their own flows.
func TestProducer_EventsDeterministic(t *testing.T) {
	p := Producer{ID: 2, Seed: 11, Flows: 5, Batch: 8, PoisonEvery: 3}
	for k := 1; k <= 6; k++ {
		a, b := p.Events(k), p.Events(k)
		if !slices.EqualFunc(a, b, func(x, y queue.Event) bool {
			return x.ID == y.ID && x.Flow == y.Flow && bytes.Equal(x.Body, y.Body)
		}) {
			t.Fatalf("batch %d differs between two calls", k)
		}
		for i, e := range a {
			pp, kk, ii, ok := parseEventID(e.ID)
			if !ok || pp != 2 || kk != k || ii != i {
				t.Fatalf("event ID %q does not parse back to (2, %d, %d)", e.ID, k, i)
			}
			poison := k%3 == 0 && i == 0
			if poison != (string(e.Body) == `{"delta":5000}`) || poison != (e.Flow == "poison-p2-b"+strconv.Itoa(k)) {
				t.Fatalf("batch %d event %d: flow %s body %s (poison %v)", k, i, e.Flow, e.Body, poison)
			}
		}
	}
	if _, _, _, ok := parseEventID("p1-b1-1"); ok {
		t.Fatal("a non-canonical ID parsed")
	}
}

func TestLastCommitted(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		content string
		want    int
		err     bool
	}{
		{"", 0, false},
		{"1\n2\n3\n", 3, false},
		{"1\n2\n3", 2, false}, // the last line was cut by a crash
		{"1\n3\n", 0, true},   // a gap: not a log this package wrote
		{"x\n", 0, true},
	}
	for _, c := range cases {
		path := filepath.Join(dir, "log")
		if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := LastCommitted(path)
		if got != c.want || (err != nil) != c.err || (err != nil && !errors.Is(err, ErrCheck)) {
			t.Errorf("LastCommitted(%q) = %d, %v; want %d, error %v", c.content, got, err, c.want, c.err)
		}
	}
	if n, err := LastCommitted(filepath.Join(dir, "missing")); n != 0 || err != nil {
		t.Errorf("missing log = %d, %v; want 0, nil", n, err)
	}
}

// A producer resumes after the last batch of its log: batches 1 and 2 are
// logged (and so not enqueued again), the torn "3" is cut, and batches
// 3, 4, ... go to the queue and to the log.
func TestProduce_ResumesAfterItsLog(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) { testProduceResumes(t, backend) })
	}
}

func testProduceResumes(t *testing.T, backend string) {
	dir := t.TempDir()
	p := Producer{Queue: newQueueTarget(t, backend), Log: filepath.Join(dir, "p.log"), ID: 1, Seed: 5, Flows: 4, Batch: 3}
	if err := os.WriteFile(p.Log, []byte("1\n2\n3"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Produce(ctx, p) }()
	for {
		if n, err := LastCommitted(p.Log); err != nil {
			t.Fatal(err)
		} else if n >= 4 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Produce returned early: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	last, err := LastCommitted(p.Log)
	if err != nil {
		t.Fatal(err)
	}
	q := openTestQueue(t, p.Queue)
	for k := 1; k <= last+1; k++ {
		for _, e := range p.Events(k) {
			_, err := q.Event(context.Background(), e.ID)
			switch {
			case k <= 2 && !errors.Is(err, queue.ErrNotFound):
				t.Fatalf("batch %d (logged before the start) was enqueued: %v", k, err)
			case k >= 3 && k <= last && err != nil:
				t.Fatalf("batch %d is logged but not in the queue: %v", k, err)
			}
		}
	}
}

// holdBack lets a batch go while the ordinary backlog is at most
// MaxBacklog and waits while it is above (here it ends with the context);
// poison flows do not count.
func TestProducer_HoldBack(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) { testProducerHoldBack(t, backend) })
	}
}

func testProducerHoldBack(t *testing.T, backend string) {
	ctx := context.Background()
	q := openTestQueue(t, newQueueTarget(t, backend))
	p := Producer{ID: 1, Seed: 1, Flows: 2, Batch: 4, PoisonEvery: 1, MaxBacklog: 3}
	if _, err := q.EnqueueBatch(ctx, p.Events(1), 1); err != nil { // 3 ordinary + 1 poison
		t.Fatal(err)
	}
	if n, err := backlog(ctx, q); n != 3 || err != nil {
		t.Fatalf("backlog = %d, %v; want 3 (the poison event left out)", n, err)
	}
	if err := p.holdBack(ctx, q); err != nil {
		t.Fatalf("backlog 3 of at most 3: holdBack = %v, want nil", err)
	}
	p.MaxBacklog = 2
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := p.holdBack(short, q); err == nil {
		t.Fatal("backlog 3 above 2: holdBack returned nil, want it to wait until the context ends")
	}
}

// A batch whose tick falls more than the skew behind the queue's clock mark
// (another writer's clock ran ahead, or the write waited that long for its
// turn) is refused with a time regression; the producer tries it again with
// a fresh tick instead of giving up.
func TestProduce_RetriesATimeRegression(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) { testProduceRetries(t, backend) })
	}
}

func testProduceRetries(t *testing.T, backend string) {
	dir := t.TempDir()
	p := Producer{Queue: newQueueTarget(t, backend), Log: filepath.Join(dir, "p.log"), ID: 1, Seed: 5, Flows: 4, Batch: 3}
	q, err := openQueue(context.Background(), p.Queue, queueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ahead := clock.Wall{}.Now() + 1500 // 1.5 s ahead: beyond the producer's 1 s skew for about half a second
	if _, err := q.Enqueue(context.Background(), queue.Event{ID: "ahead", Flow: "x", Body: []byte("{}")}, ahead); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Produce(ctx, p) }()
	for {
		if n, err := LastCommitted(p.Log); err != nil {
			t.Fatal(err)
		} else if n >= 1 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Produce gave up: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
