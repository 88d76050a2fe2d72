package console

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queuestore"
)

// A queue run in real time shows its ticks as UTC date-times with how long
// ago they were, and its policy's spans as durations; a logical queue
// shows the same ticks as numbers.
func TestPages_ShowRealTimeAsPeopleReadIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	enq := time.Date(2026, 12, 4, 12, 0, 5, 0, time.UTC)
	q, err := queuestore.Open(filepath.Join(t.TempDir(), "queue.db"),
		queuestore.WithPolicy(queuestore.Policy{Lease: 30_000, MaxAttempts: 3, BackoffBase: 1000, BackoffCap: 60_000}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	if _, err := q.Enqueue(ctx, queuestore.Event{ID: "e1", Flow: "tenant-a", Body: []byte(`{"delta":1}`)}, clock.Tick(enq.UnixMilli())); err != nil {
		t.Fatal(err)
	}
	now := enq.Add(3*time.Minute + 10*time.Second)
	wall := serve(t, q, nil, Options{RealTime: true, WallNow: func() time.Time { return now }})
	for path, wants := range map[string][]string{
		"/":                   {"2026-12-04 12:00:05 UTC, 3 min ago", "30 s", "1 s doubling to 1 min"},
		"/flows":              {"clock mark 2026-12-04 12:00:05 UTC, 3 min ago"},
		"/flow?name=tenant-a": {"2026-12-04 12:00:05 UTC, 3 min ago"},
		"/event?id=e1":        {"2026-12-04 12:00:05 UTC, 3 min ago"},
	} {
		code, body := wall.get(t, wall.client(t), path)
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d\n%s", path, code, body)
		}
		mustContain(t, path, body, wants...)
		if strings.Contains(body, itoa(enq.UnixMilli())) {
			t.Errorf("GET %s (real time) still shows the raw tick %d", path, enq.UnixMilli())
		}
	}
	logical := serve(t, q, nil, Options{})
	code, body := logical.get(t, logical.client(t), "/event?id=e1")
	if code != http.StatusOK {
		t.Fatalf("GET /event = %d", code)
	}
	mustContain(t, "/event (logical)", body, itoa(enq.UnixMilli()))
	if strings.Contains(body, " UTC, ") {
		t.Errorf("a logical console shows wall-clock times:\n%s", body)
	}
}
