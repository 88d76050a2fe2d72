package pgqueuestore

import (
	"context"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/queue"
)

// A listener on one store hears an enqueue made through another Store (as
// a relay in another process would); a rolled-back write sends nothing; the
// limiter lets at most one wake-up per interval through per Store.
// Notifications arrive in commit order, so a marker the test sends itself
// after a write proves that the write sent nothing. The context's deadline
// is a watchdog against a hang, not a timed assertion.
func TestListen_WakesOnEnqueue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, url, schema := open(t)
	l, err := s.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	producer, err := Open(ctx, url, WithSchema(schema), WithNotifyInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	marker := func(m string) {
		t.Helper()
		if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, s.channel(), m); err != nil {
			t.Fatal(err)
		}
	}
	next := func() string {
		t.Helper()
		p, err := l.wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	// The producer's first enqueue wakes the listener.
	if _, err := producer.Enqueue(ctx, queue.Event{ID: "a1", Flow: "a", Body: []byte("x")}, 5); err != nil {
		t.Fatal(err)
	}
	if p := next(); p != "" {
		t.Fatalf("first notification %q, want the enqueue's wake-up", p)
	}
	eager, err := Open(ctx, url, WithSchema(schema), WithNotifyInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer eager.Close()
	// A refused enqueue (a conflict) rolls back: nothing is sent.
	if _, err := eager.Enqueue(ctx, queue.Event{ID: "a1", Flow: "b", Body: []byte("x")}, 6); err == nil {
		t.Fatal("conflicting enqueue accepted")
	}
	marker("after the refused enqueue")
	if p := next(); p != "after the refused enqueue" {
		t.Fatalf("a refused enqueue sent %q", p)
	}
	// Within the producer's interval (an hour) its second enqueue sends
	// nothing.
	if _, err := producer.Enqueue(ctx, queue.Event{ID: "a2", Flow: "a", Body: []byte("x")}, 6); err != nil {
		t.Fatal(err)
	}
	marker("after the limited enqueue")
	if p := next(); p != "after the limited enqueue" {
		t.Fatalf("the limited enqueue sent %q", p)
	}
	// A store with interval 0 wakes on every write that makes work: a new
	// event, an ack that moves the head to the next event.
	if _, err := eager.Enqueue(ctx, queue.Event{ID: "b1", Flow: "b", Body: []byte("x")}, 7); err != nil {
		t.Fatal(err)
	}
	if p := next(); p != "" {
		t.Fatalf("got %q, want the enqueue's wake-up", p)
	}
	c, ok, err := eager.Claim(ctx, 7)
	if err != nil || !ok || c.EventID != "a1" {
		t.Fatalf("claim %+v %v %v", c, ok, err)
	}
	if _, err := eager.Settle(ctx, c.EventID, c.Generation, queue.Result{OK: true}, 7); err != nil {
		t.Fatal(err)
	}
	if p := next(); p != "" {
		t.Fatalf("got %q, want the ack's wake-up", p)
	}
}
