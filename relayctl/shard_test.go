package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/shard"
	"github.com/fairrelay/fairrelay/webhook"
)

// deliveries is an HTTP endpoint for 'relayctl relay --to' that counts
// what it was sent: each event's successful deliveries (2xx answered), and
// answers 500 to the events in failing.
type deliveries struct {
	mu      sync.Mutex
	ok      map[string]int
	failed  map[string]int
	failing map[string]bool
}

func newDeliveries(t *testing.T, failing ...string) (*deliveries, string) {
	d := &deliveries{ok: map[string]int{}, failed: map[string]int{}, failing: map[string]bool{}}
	for _, id := range failing {
		d.failing[id] = true
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(webhook.HeaderID)
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.failing[id] {
			d.failed[id]++
			http.Error(w, "not now", http.StatusInternalServerError)
			return
		}
		d.ok[id]++
	}))
	t.Cleanup(srv.Close)
	return d, srv.URL + "/"
}

// heal makes every event succeed from now on.
func (d *deliveries) heal() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failing = map[string]bool{}
}

// once fails the test unless every id in want was delivered exactly once,
// and nothing else was.
func (d *deliveries) once(t *testing.T, want []string) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range want {
		if d.ok[id] != 1 {
			t.Errorf("event %s delivered %d times, want once", id, d.ok[id])
		}
	}
	if len(d.ok) != len(want) {
		t.Errorf("%d distinct events delivered, want %d", len(d.ok), len(want))
	}
}

// shardedEvents writes a JSONL file of flows × per events (IDs ev-F-S)
// into dir and returns its path and the IDs.
func shardedEvents(t *testing.T, dir string, flows, per int) (string, []string) {
	t.Helper()
	var b strings.Builder
	var ids []string
	for s := 1; s <= per; s++ {
		for f := range flows {
			id := fmt.Sprintf("ev-%02d-%d", f, s)
			fmt.Fprintf(&b, `{"id":%q,"flow":"tenant-%02d","body":{"delta":%d}}`+"\n", id, f, f+s)
			ids = append(ids, id)
		}
	}
	p := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, ids
}

// dropShardSchemas drops, when t ends, every schema whose name starts with
// base and "_": the shard schemas of a PostgreSQL sharded queue, its
// reshards' new and old sets.
func dropShardSchemas(t *testing.T, base string) {
	t.Cleanup(func() {
		ctx := context.Background()
		pool := pgtest.Pool(t)
		rows, err := pool.Query(ctx, `SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)`, base+"_")
		if err != nil {
			t.Error(err)
			return
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Error(err)
			return
		}
		for _, n := range names {
			if _, err := pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{n}.Sanitize()+" CASCADE"); err != nil {
				t.Errorf("drop schema %s: %v", n, err)
			}
		}
	})
}

// sqliteShardedQueue is the --queue of a new SQLite sharded queue's
// directory (not yet created).
func sqliteShardedQueue(t *testing.T) string { return filepath.Join(t.TempDir(), "q") }

// pgShardedQueue is the --queue of a new PostgreSQL sharded queue's base
// schema (not yet created), its shard schemas dropped when t ends.
func pgShardedQueue(t *testing.T) string {
	url, base := pgtest.Schema(t)
	dropShardSchemas(t, base)
	return pgURL(t, url, base)
}

// statusOf reads 'status --json' of q.
func statusOf(t *testing.T, q string) statsRow {
	t.Helper()
	var st statusReport
	if err := json.Unmarshal([]byte(mustPG(t, q, "", "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	return st.Stats
}

// testShardedEndToEnd runs the operator's whole round on a sharded queue
// of n shards at q: shards create, enqueue (one event and a JSONL file),
// relay --exit-when-idle to an endpoint that fails one event (quarantined
// at its first failure), status, flows --blocked, quarantined, events,
// pause/resume, set-weight, policy, audit, redrive, relay again: every
// event delivered exactly once (the failed one once more, as a failure),
// each flow stored in the shard its name hashes to.
func testShardedEndToEnd(t *testing.T, q string, n int) {
	if out := mustPG(t, q, "", "shards", "create", "--count", fmt.Sprint(n)); !strings.Contains(out, fmt.Sprintf("%d shards", n)) {
		t.Fatalf("shards create: %q", out)
	}
	file, ids := shardedEvents(t, t.TempDir(), 12, 3)
	mustPG(t, q, "", "enqueue", "--file", file)
	mustPG(t, q, "", "enqueue", "--id", "bad-1", "--flow", "bad", "--body", `{"delta":1}`)
	mustPG(t, q, "", "enqueue", "--id", "bad-2", "--flow", "bad", "--body", `{"delta":2}`)
	ids = append(ids, "bad-1", "bad-2")
	if st := statusOf(t, q); st.Flows != 13 || st.EventsByState.Pending != int64(len(ids)) {
		t.Fatalf("status after enqueue: %d flows, %+v; want 13 flows, %d pending", st.Flows, st.EventsByState, len(ids))
	}

	d, url := newDeliveries(t, "bad-1")
	code, _, errs := runPG(t, q, "", "relay", "--to", url, "--secret", "s", "--exit-when-idle", "--max-attempts", "1")
	if code != exitUndelivered {
		t.Fatalf("relay: exit %d, want %d (one quarantined)\n%s", code, exitUndelivered, errs)
	}
	st := statusOf(t, q)
	if st.EventsByState.Acked != int64(len(ids)-2) || st.EventsByState.Quarantined != 1 || st.EventsByState.Pending != 1 {
		t.Fatalf("status after the first relay: %+v", st.EventsByState)
	}
	if out := mustPG(t, q, "", "flows", "--blocked"); !strings.Contains(out, "bad") || strings.Contains(out, "tenant-") {
		t.Errorf("flows --blocked:\n%s", out)
	}
	if out := mustPG(t, q, "", "quarantined"); !strings.Contains(out, "bad-1") {
		t.Errorf("quarantined:\n%s", out)
	}
	if out := mustPG(t, q, "", "events", "--flow", "bad"); !strings.Contains(out, "bad-2") {
		t.Errorf("events --flow bad:\n%s", out)
	}
	mustPG(t, q, "", "flows", "pause", "tenant-03", "--reason", "tenant asked")
	mustPG(t, q, "", "flows", "resume", "tenant-03", "--reason", "tenant is back")
	mustPG(t, q, "", "flows", "set-weight", "tenant-04", "3", "--reason", "paying tenant")
	mustPG(t, q, "", "policy", "set", "--lease", "60s", "--reason", "slower endpoint")
	d.heal()
	if out := mustPG(t, q, "", "redrive", "bad-1", "--reason", "endpoint fixed"); !strings.Contains(out, "bad-1") {
		t.Errorf("redrive: %q", out)
	}
	audit := mustPG(t, q, "", "audit")
	for _, want := range []string{"endpoint fixed", "tenant asked", "tenant is back", "paying tenant", "slower endpoint", "relayctl shards create"} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit has no %q:\n%s", want, audit)
		}
	}
	mustPG(t, q, "", "relay", "--to", url, "--secret", "s", "--exit-when-idle")
	d.once(t, ids)
	if st := statusOf(t, q); st.EventsByState != (eventCounts{Acked: int64(len(ids))}) {
		t.Errorf("status at the end: %+v, want all %d acked", st.EventsByState, len(ids))
	}

	// Each flow is in the shard its name hashes to, and snapshot says which.
	var snap struct {
		Queue shardedSnapshot `json:"queue"`
	}
	if err := json.Unmarshal([]byte(mustPG(t, q, "", "snapshot")), &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Queue.Shards) != n {
		t.Fatalf("snapshot: %d shards, want %d", len(snap.Queue.Shards), n)
	}
	flows := 0
	for i, s := range snap.Queue.Shards {
		if s.Label != (queue.ShardLabel{Index: i, Count: n}) {
			t.Errorf("shard %d (%s): label %+v", i, s.Store, s.Label)
		}
		for _, f := range s.Snapshot.Flows {
			flows++
			if got := shard.Of(f.Flow, n); got != i {
				t.Errorf("flow %s is in shard %d, hashes to %d", f.Flow, i, got)
			}
		}
	}
	if flows != 13 {
		t.Errorf("snapshot: %d flows, want 13", flows)
	}
	var rows []shardRow
	if err := json.Unmarshal([]byte(mustPG(t, q, "", "shards", "--json")), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != n {
		t.Fatalf("shards --json: %d rows, want %d", len(rows), n)
	}
	// Prune goes to every shard: with a retention of 1 ms, every acked
	// event of every shard goes.
	mustPG(t, q, "", "policy", "set", "--retention", "1ms", "--reason", "keep nothing")
	if out := mustPG(t, q, "", "prune"); !strings.Contains(out, fmt.Sprintf("pruned %d acked events", len(ids))) {
		t.Errorf("prune: %q", out)
	}
}

// A 3-shard SQLite queue is one queue for every command, and a relay
// delivers each of its events exactly once.
func TestShards_SQLite_EndToEnd(t *testing.T) {
	q := sqliteShardedQueue(t)
	testShardedEndToEnd(t, q, 3)
	for i := range 3 {
		if _, err := os.Stat(filepath.Join(q, shardFile(i))); err != nil {
			t.Errorf("shard file %d: %v", i, err)
		}
	}
}

// A 2-shard PostgreSQL queue, the same.
func TestShards_Postgres_EndToEnd(t *testing.T) {
	testShardedEndToEnd(t, pgShardedQueue(t), 2)
}

// openSharded opens the sharded queue q in process, as a writer.
func openSharded(t *testing.T, q string) shardedLib {
	t.Helper()
	e := newEnv(strings.NewReader(""), &strings.Builder{}, &strings.Builder{})
	e.queuePath = q
	s, err := e.shardedStore(shardMode{hold: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testReshard reshards a queue 2 -> 3 -> 1 with events pending, in flight
// (their leases expired), quarantined and acked: nothing is lost or
// doubled, the counts and the audit say so, redrive still works, and a
// relay then delivers every event not acked exactly once. Before that, a
// reshard is refused while a lease is live and while a writer has the
// queue open, changing nothing.
func testReshard(t *testing.T, q string) {
	ctx := context.Background()
	mustPG(t, q, "", "shards", "create", "--count", "2")
	file, ids := shardedEvents(t, t.TempDir(), 12, 3)
	mustPG(t, q, "", "enqueue", "--file", file)

	// At tick 1: 12 heads claimed (lease 5 ticks, to tick 6); 4 acked,
	// 3 quarantined, 5 left in flight.
	s := openSharded(t, q)
	cs, err := s.ClaimBatch(ctx, 1, 12)
	if err != nil || len(cs) != 12 {
		t.Fatalf("claim: %d claims, %v", len(cs), err)
	}
	acked := map[string]bool{}
	var items []queue.SettleItem
	for i, c := range cs[:7] {
		r := queue.Result{OK: true}
		if i >= 4 {
			r = queue.Result{Reason: "unsupported_delta", Permanent: true}
		} else {
			acked[c.EventID] = true
		}
		items = append(items, queue.SettleItem{EventID: c.EventID, Generation: c.Generation, Result: r})
	}
	if _, err := s.SettleBatch(ctx, items, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := statusOf(t, q)
	if before.EventsByState != (eventCounts{Pending: 24, Inflight: 5, Quarantined: 3, Acked: 4}) {
		t.Fatalf("before the reshard: %+v", before.EventsByState)
	}

	// Refused: live leases at tick 3; a writer holding the queue open.
	code, _, errs := runPG(t, q, "", "reshard", "--to", "3", "--reason", "more tenants", "--now", "3")
	if code != exitFail || !strings.Contains(errs, "5 event(s) have a live lease at tick 3") || !strings.Contains(errs, "--force") {
		t.Fatalf("reshard with live leases: exit %d\n%s", code, errs)
	}
	w := openSharded(t, q)
	code, _, errs = runPG(t, q, "", "reshard", "--to", "3", "--reason", "more tenants", "--now", "10")
	if code != exitFail || !strings.Contains(errs, "has queue") || !strings.Contains(errs, "stop it first") {
		t.Fatalf("reshard beside a writer: exit %d\n%s", code, errs)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if st := statusOf(t, q); st != before {
		t.Fatalf("a refused reshard changed the queue: %+v, was %+v", st, before)
	}

	for _, step := range []struct {
		to    int
		now   string
		epoch int64
	}{{3, "10", 1}, {1, "11", 2}} {
		reason := fmt.Sprintf("to %d shards", step.to)
		out := mustPG(t, q, "", "reshard", "--to", fmt.Sprint(step.to), "--reason", reason, "--now", step.now)
		if !strings.Contains(out, fmt.Sprintf("-> %d shards (epoch %d): 12 flows, 36 events (24 pending, 5 in flight, 3 quarantined, 4 acked) moved", step.to, step.epoch)) {
			t.Errorf("reshard --to %d: %q", step.to, out)
		}
		st := statusOf(t, q)
		if st.EventsByState != before.EventsByState || st.Flows != before.Flows {
			t.Errorf("after reshard --to %d: %+v, %d flows; was %+v, %d flows", step.to, st.EventsByState, st.Flows, before.EventsByState, before.Flows)
		}
		var rows []shardRow
		if err := json.Unmarshal([]byte(mustPG(t, q, "", "shards", "--json")), &rows); err != nil {
			t.Fatal(err)
		}
		if len(rows) != step.to || rows[0].Epoch != step.epoch {
			t.Errorf("after reshard --to %d: shards %+v", step.to, rows)
		}
		if a := mustPG(t, q, "", "audit"); !strings.Contains(a, reason) {
			t.Errorf("the audit has no row of the reshard to %d:\n%s", step.to, a)
		}
	}
	if out := mustPG(t, q, "", "redrive", "--all", "--reason", "fixed", "--now", "12"); !strings.Contains(out, "3 events") {
		t.Errorf("redrive --all after the reshards: %q", out)
	}
	// New events into the moved set, in an old flow and a new one (on
	// PostgreSQL the renamed schemas' insert trigger must find its own
	// schema's flows).
	mustPG(t, q, "", "enqueue", "--id", "late-1", "--flow", "tenant-00", "--body", `{"delta":1}`, "--now", "13")
	mustPG(t, q, "", "enqueue", "--id", "late-2", "--flow", "newcomer", "--body", `{"delta":1}`, "--now", "13")
	ids = append(ids, "late-1", "late-2")
	d, url := newDeliveries(t)
	mustPG(t, q, "", "relay", "--to", url, "--secret", "s", "--exit-when-idle")
	var want []string
	for _, id := range ids {
		if !acked[id] {
			want = append(want, id)
		}
	}
	d.once(t, want)
	if st := statusOf(t, q); st.EventsByState != (eventCounts{Acked: 38}) {
		t.Errorf("after the relay: %+v, want 38 acked", st.EventsByState)
	}
}

// Resharding a SQLite queue keeps each old set as DIR.before-epoch-K, and
// a set with a missing, extra or foreign shard is refused.
func TestReshard_SQLite(t *testing.T) {
	q := sqliteShardedQueue(t)
	testReshard(t, q)
	for k, n := range []int{2, 3} {
		files, err := filepath.Glob(filepath.Join(fmt.Sprintf("%s.before-epoch-%d", q, k), "shard-*.db"))
		if err != nil || len(files) != n {
			t.Errorf("backup of epoch %d: %v (%v), want %d shard files", k, files, err, n)
		}
	}
	if _, err := os.Stat(q + ".resharding"); !os.IsNotExist(err) {
		t.Errorf("the new set's working name is left: %v", err)
	}

	// A copy of the 3-shard backup: missing, extra and foreign shards.
	bad := filepath.Join(t.TempDir(), "bad")
	copyDir(t, q+".before-epoch-1", bad)
	if err := os.Rename(filepath.Join(bad, shardFile(1)), filepath.Join(t.TempDir(), "aside.db")); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runPG(t, bad, "", "status")
	if code != exitFail || !strings.Contains(errs, "shard-001.db is missing") {
		t.Errorf("status on a set missing a shard: exit %d\n%s", code, errs)
	}
	copyFile(t, filepath.Join(q+".before-epoch-1", shardFile(1)), filepath.Join(bad, shardFile(1)))
	copyFile(t, filepath.Join(q, shardFile(0)), filepath.Join(bad, shardFile(3)))
	code, _, errs = runPG(t, bad, "", "status")
	if code != exitFail || !strings.Contains(errs, "shard label") {
		t.Errorf("status on a set with an extra shard: exit %d\n%s", code, errs)
	}
	os.Remove(filepath.Join(bad, shardFile(3)))
	copyFile(t, filepath.Join(q+".before-epoch-0", shardFile(1)), filepath.Join(bad, shardFile(1)))
	code, _, errs = runPG(t, bad, "", "status")
	if code != exitFail || !strings.Contains(errs, "shard label") {
		t.Errorf("status on a set with a shard of another epoch: exit %d\n%s", code, errs)
	}
}

// The same on PostgreSQL: schemas renamed, the old sets kept.
func TestReshard_Postgres(t *testing.T) {
	q := pgShardedQueue(t)
	testReshard(t, q)
	_, base, err := pgTarget(q, "", "queue")
	if err != nil {
		t.Fatal(err)
	}
	for k, n := range []int{2, 3} {
		if got := pgtest.SchemasWithPrefix(t, fmt.Sprintf("%s_before_epoch_%d_s", base, k)); got != n {
			t.Errorf("backup of epoch %d: %d schemas, want %d", k, got, n)
		}
	}
	if got := pgtest.SchemasWithPrefix(t, base+"_next"); got != 0 {
		t.Errorf("%d schemas of the new set's working name are left", got)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Mkdir(to, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range ents {
		copyFile(t, filepath.Join(from, en.Name()), filepath.Join(to, en.Name()))
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The relay's gauges on a sharded queue are one queue's: a scrape of a
// relay over 3 shards shows the backlog and paused flows of all of them,
// and fairrelay_shards 3.
func TestShards_RelayMetrics(t *testing.T) {
	q := sqliteShardedQueue(t)
	mustPG(t, q, "", "shards", "create", "--count", "3")
	shardsHit := map[int]bool{}
	for i := range 6 {
		flow := fmt.Sprintf("tenant-%d", i)
		shardsHit[shard.Of(flow, 3)] = true
		mustPG(t, q, "", "enqueue", "--id", fmt.Sprintf("e%d", i), "--flow", flow, "--body", `{"delta":1}`)
		// Paused: nothing is dispatchable, so the backlog stays put.
		mustPG(t, q, "", "flows", "pause", flow, "--reason", "hold for the scrape")
	}
	if len(shardsHit) < 2 {
		t.Fatalf("the flows are in %d shard(s): the test would not read across shards", len(shardsHit))
	}
	_, url := newDeliveries(t)
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	done := make(chan int)
	go func() {
		done <- runContext(ctx, []string{"--queue", q, "relay", "--to", url, "--secret", "s", "--metrics", "127.0.0.1:0"},
			strings.NewReader(""), &syncBuffer{}, stderr)
	}()
	defer func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("relay: exit %d\n%s", code, stderr)
		}
	}()
	re := regexp.MustCompile(`url=(http://\S+/metrics)`)
	var metricsURL string
	waitFor(t, time.Minute, "the relay's metrics URL", func() bool {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			metricsURL = m[1]
		}
		return metricsURL != ""
	})
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nfairrelay_shards 3\n", "\nfairrelay_backlog_events 6\n", "\nfairrelay_paused_flows 6\n", "\nfairrelay_quarantined_events 0\n"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the scrape has no %q", strings.TrimSpace(want))
		}
	}
}

// One shard opened alone takes no enqueue (the event might belong to
// another shard), but a relay may run over it; a writer finds a reshard
// under way and changes nothing; relayctl web serves a sharded queue.
func TestShards_SQLite_Guards(t *testing.T) {
	q := sqliteShardedQueue(t)
	mustPG(t, q, "", "shards", "create", "--count", "2")
	mustPG(t, q, "", "enqueue", "--id", "a", "--flow", "tenant-a", "--body", `{"delta":1}`)
	one := filepath.Join(q, shardFile(1))
	code, _, errs := runPG(t, one, "", "enqueue", "--id", "b", "--flow", "tenant-b", "--body", `{"delta":1}`)
	if code != exitFail || !strings.Contains(errs, "is shard 1 of 2 (epoch 0) of a sharded queue: enqueue through the sharded queue") {
		t.Errorf("enqueue into one shard: exit %d\n%s", code, errs)
	}

	hold, err := holdSQLite(q, true) // as reshard holds it
	if err != nil {
		t.Fatal(err)
	}
	code, _, errs = runPG(t, q, "", "enqueue", "--id", "c", "--flow", "tenant-c", "--body", `{"delta":1}`)
	if code != exitFail || !strings.Contains(errs, "a reshard of this queue is under way") {
		t.Errorf("enqueue during a reshard: exit %d\n%s", code, errs)
	}
	if out := mustPG(t, q, "", "status"); !strings.Contains(out, "pending 1,") {
		t.Errorf("status during a reshard (reads take no hold):\n%s", out)
	}
	hold.Close()

	addr := startWebWith(t, "", []string{"--queue", q, "--receiver", ""}, "--listen", "127.0.0.1:0")
	resp, err := http.Get("http://" + addr + "/flows")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "tenant-a") {
		t.Errorf("web /flows on a sharded queue: %d\n%s", resp.StatusCode, body)
	}
}

// A PostgreSQL base schema that is both a plain queue and a sharded one is
// refused as ambiguous; shards create refuses a base already in use.
func TestShards_Postgres_Ambiguous(t *testing.T) {
	q := pgShardedQueue(t)
	mustPG(t, q, "", "shards", "create", "--count", "2")
	code, _, errs := runPG(t, q, "", "shards", "create", "--count", "2")
	if code != exitFail || !strings.Contains(errs, "already exist") {
		t.Errorf("shards create twice: exit %d\n%s", code, errs)
	}
	_, base, err := pgTarget(q, "", "queue")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgtest.Pool(t).Exec(context.Background(), "CREATE SCHEMA "+pgx.Identifier{base}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runPG(t, q, "", "status")
	if code != exitFail || !strings.Contains(errs, "both a plain queue schema") {
		t.Errorf("status on an ambiguous base: exit %d\n%s", code, errs)
	}
}

// An idle relay over a 2-shard PostgreSQL queue is woken by an enqueue
// into either shard: it polls once an hour, so each event here is
// delivered within the test only because that shard's NOTIFY reached the
// relay's listener over every shard (listenAll).
func TestShards_Postgres_WakeUpFromEveryShard(t *testing.T) {
	q := pgShardedQueue(t)
	mustPG(t, q, "", "shards", "create", "--count", "2")
	// One flow per shard.
	flows := map[int]string{}
	for i := 0; len(flows) < 2; i++ {
		f := fmt.Sprintf("tenant-%d", i)
		if _, ok := flows[shard.Of(f, 2)]; !ok {
			flows[shard.Of(f, 2)] = f
		}
	}
	mustPG(t, q, "", "enqueue", "--id", "first", "--flow", flows[0], "--body", `{"delta":1}`)
	d, url := newDeliveries(t)
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	done := make(chan int)
	go func() {
		done <- runContext(ctx, []string{"--queue", q, "relay", "--to", url, "--secret", "s", "--poll", "1h"},
			strings.NewReader(""), &syncBuffer{}, stderr)
	}()
	defer func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("relay: exit %d\n%s", code, stderr)
		}
	}()
	delivered := func(id string) func() bool {
		return func() bool {
			d.mu.Lock()
			defer d.mu.Unlock()
			return d.ok[id] == 1
		}
	}
	waitFor(t, time.Minute, "the first event (claimed at the relay's start)", delivered("first"))
	for sh := range 2 {
		// The relay is idle now (its start's claims are done): only a
		// wake-up brings it back before the hour.
		id := fmt.Sprintf("woken-%d", sh)
		mustPG(t, q, "", "enqueue", "--id", id, "--flow", flows[sh], "--body", `{"delta":1}`)
		waitFor(t, time.Minute, "the event enqueued into shard "+fmt.Sprint(sh), delivered(id))
	}
}

// On a sharded PostgreSQL queue too, a writer finds a reshard under way
// and changes nothing, while a read command takes no hold and reads.
func TestShards_Postgres_Guards(t *testing.T) {
	q := pgShardedQueue(t)
	mustPG(t, q, "", "shards", "create", "--count", "2")
	mustPG(t, q, "", "enqueue", "--id", "a", "--flow", "tenant-a", "--body", `{"delta":1}`)
	_, base, err := pgTarget(q, "", "queue")
	if err != nil {
		t.Fatal(err)
	}
	hold, err := holdPG(context.Background(), pgtest.Pool(t), base, true) // as reshard holds it
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	code, _, errs := runPG(t, q, "", "enqueue", "--id", "c", "--flow", "tenant-c", "--body", `{"delta":1}`)
	if code != exitFail || !strings.Contains(errs, "a reshard of this queue is under way") {
		t.Errorf("enqueue during a reshard: exit %d\n%s", code, errs)
	}
	for _, args := range [][]string{{"status"}, {"flows"}, {"redrive", "--all", "--dry-run"}} {
		if code, out, errs := runPG(t, q, "", args...); code != exitOK {
			t.Errorf("%v during a reshard (reads take no hold): exit %d\n%s%s", args, code, out, errs)
		}
	}
}

// The hold of a SQLite sharded queue is one lock file however --queue
// writes the directory: a reshard through "DIR/" or "./DIR/." still finds
// a relay's hold through "DIR".
func TestShardLockOneFile(t *testing.T) {
	t.Parallel()
	q := sqliteShardedQueue(t)
	mustPG(t, q, "", "shards", "create", "--count", "2")
	shared, err := holdSQLite(q, false) // as a relay holds it
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	for _, other := range []string{q + "/", q + "/.", filepath.Join(q, "..", filepath.Base(q)) + "/"} {
		if h, err := holdSQLite(other, true); !errors.Is(err, errHeld) {
			if err == nil {
				h.Close()
			}
			t.Errorf("exclusive hold through %q beside a shared one through %q: %v, want errHeld", other, q, err)
		}
	}
}

// A queue-wide write that one shard refuses after another took it says
// which shards changed, never that nothing did.
func TestShards_PolicyRefusedPartway(t *testing.T) {
	t.Parallel()
	q := sqliteShardedQueue(t)
	mustPG(t, q, "", "shards", "create", "--count", "2")
	marks := map[int]string{0: "40", 1: "60"}
	for k := 0; len(marks) > 0; k++ {
		f := fmt.Sprintf("f%d", k)
		if m, ok := marks[shard.Of(f, 2)]; ok {
			mustPG(t, q, "", "enqueue", "--id", f, "--flow", f, "--body", "x", "--now", m)
			delete(marks, shard.Of(f, 2))
		}
	}
	code, _, errs := runPG(t, q, "", "policy", "set", "--lease", "10", "--reason", "shorter", "--now", "50")
	if code != exitFail || !strings.Contains(errs, shardFile(1)+" refused") || !strings.Contains(errs, shardFile(0)+" had changed") ||
		strings.Contains(errs, "nothing changed") {
		t.Errorf("policy set refused part way: exit %d\n%s", code, errs)
	}
}
