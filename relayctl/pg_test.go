package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/pgreceiverstore"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/receiver"
)

// pgURL is the test server's URL with ?schema=NAME added, as an operator
// gives it to --queue or --receiver; extra query parameters are added too.
func pgURL(t *testing.T, base, schema string, extra ...string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("schema", schema)
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// pgQueueSchema is a new test schema holding a queue store (created through
// the library on the shared pool, dropped at the end of the test), and its
// --queue URL.
func pgQueueSchema(t *testing.T, opts ...pgqueuestore.Option) (*pgqueuestore.Store, string) {
	t.Helper()
	base, schema := pgtest.Schema(t)
	s, err := pgqueuestore.OpenPool(context.Background(), pgtest.Pool(t), append([]pgqueuestore.Option{pgqueuestore.WithSchema(schema)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s, pgURL(t, base, schema)
}

// runPG runs relayctl in process with --queue and --receiver as given.
func runPG(t *testing.T, queueURL, receiverURL string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	full := append([]string{"--queue", queueURL, "--receiver", receiverURL}, args...)
	code := run(full, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// mustPG is runPG that fails the test unless relayctl exits 0.
func mustPG(t *testing.T, queueURL, receiverURL string, args ...string) string {
	t.Helper()
	code, out, errs := runPG(t, queueURL, receiverURL, args...)
	if code != exitOK {
		t.Fatalf("relayctl %s: exit status = %d, want 0; stderr:\n%s", strings.Join(args, " "), code, errs)
	}
	return out
}

// TestPostgres_URL: ?schema= is taken out of the URL pgx sees and names the
// schema; without it the stores' default schemas are used; messages never
// show the password.
func TestPostgres_URL(t *testing.T) {
	conn, schema, err := pgTarget("postgres://u:secret@h:5432/db?sslmode=disable&schema=my_q", pgqueuestore.DefaultSchema, "queue")
	if err != nil || schema != "my_q" || conn != "postgres://u:secret@h:5432/db?sslmode=disable" {
		t.Errorf("pgTarget = %q, %q, %v", conn, schema, err)
	}
	if _, schema, _ := pgTarget("postgresql://h/db", pgreceiverstore.DefaultSchema, "receiver"); schema != "fairrelay_receiver" {
		t.Errorf("default schema = %q, want fairrelay_receiver", schema)
	}
	if _, _, err := pgTarget("postgres://h/db?schema=", "x", "queue"); !errors.As(err, new(*usageError)) {
		t.Errorf("empty schema: err = %v, want a usage error", err)
	}
	if s := shown("postgres://u:secret@h/db"); strings.Contains(s, "secret") {
		t.Errorf("shown = %q shows the password", s)
	}
	if isPostgres("queue.db") || !isPostgres("postgresql://h/db") {
		t.Error("isPostgres misclassifies")
	}
}

// TestPostgres_OperatorCommands runs the operator's commands against a
// PostgreSQL queue and receiver in process: enqueue creates the queue's
// schema, status / flows / events / quarantined / audit read it, redrive
// (one and --all) and policy set write audited changes, snapshot reads
// both stores; web and flows set-weight refuse the URL (exit 2, typed
// error), and a missing schema is refused (exit 1) without being created.
func TestPostgres_OperatorCommands(t *testing.T) {
	base, qschema := pgtest.Schema(t)
	_, rschema := pgtest.Schema(t)
	qURL, rURL := pgURL(t, base, qschema), pgURL(t, base, rschema)
	ctx := context.Background()

	// A read command on a schema that does not exist: refused, not created.
	code, _, errs := runPG(t, qURL, "", "status")
	if code != exitFail || !strings.Contains(errs, "does not exist") {
		t.Fatalf("status on a missing schema: exit %d, stderr %q; want 1, 'does not exist'", code, errs)
	}
	var exists bool
	if err := pgtest.Pool(t).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, qschema).Scan(&exists); err != nil || exists {
		t.Fatalf("status created schema %s (exists %v, err %v)", qschema, exists, err)
	}

	enq := func(id, flow string) {
		mustPG(t, qURL, "", "enqueue", "--id", id, "--flow", flow, "--body", `{"delta":1}`)
	}
	enq("e1", "a")
	enq("e2", "a")
	// Quarantine e1, then e3, through the library (three failed claims
	// each); e2 waits behind e1.
	s, err := pgqueuestore.OpenPool(ctx, pgtest.Pool(t), pgqueuestore.WithSchema(qschema))
	if err != nil {
		t.Fatal(err)
	}
	last, err := driveToQuarantine(ctx, s, "e1", 0, "http_500", "HTTP 500 Internal Server Error", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	enq("e3", "b")
	if last, err = driveToQuarantine(ctx, s, "e3", last, "http_410", "", io.Discard); err != nil {
		t.Fatal(err)
	}
	enq("e4", "c")

	var st statusReport
	decodeStrict(t, mustPG(t, qURL, "", "status", "--json"), &st)
	if st.Stats.Flows != 3 || st.Stats.EventsByState.Quarantined != 2 || st.Stats.Quarantined != 2 {
		t.Fatalf("status = %+v, want 3 flows, 2 quarantined", st.Queue)
	}
	if out := mustPG(t, qURL, "", "quarantined"); !strings.Contains(out, "e1") || !strings.Contains(out, "e3") {
		t.Errorf("quarantined does not list e1 and e3:\n%s", out)
	}
	var evs []eventRow
	decodeStrict(t, mustPG(t, qURL, "", "events", "--flow", "a", "--json"), &evs)
	if len(evs) != 2 || evs[0].ID != "e1" || evs[0].State != "quarantined" || evs[1].State != "pending" {
		t.Fatalf("events of a = %+v", evs)
	}

	now := fmt.Sprint(last + 1)
	gen := evs[0].Generation
	mustPG(t, qURL, "", "redrive", "e1", "--reason", "endpoint fixed", "--now", now)
	decodeStrict(t, mustPG(t, qURL, "", "events", "--flow", "a", "--json"), &evs)
	if evs[0].State != "pending" || evs[0].Generation != gen+1 || evs[0].Attempts != 0 {
		t.Errorf("after redrive e1 = %+v, want pending, generation %d, attempts 0", evs[0], gen+1)
	}
	mustPG(t, qURL, "", "redrive", "--all", "--reason", "all fixed", "--now", now)
	decodeStrict(t, mustPG(t, qURL, "", "status", "--json"), &st)
	if st.Stats.EventsByState.Quarantined != 0 {
		t.Errorf("after redrive --all: %d quarantined, want 0", st.Stats.EventsByState.Quarantined)
	}

	mustPG(t, qURL, "", "policy", "set", "--lease", "7", "--reason", "slower endpoint", "--now", now)
	var pol policyFullRow
	decodeStrict(t, mustPG(t, qURL, "", "policy", "--json"), &pol)
	if pol.Lease != 7 {
		t.Errorf("policy lease = %d after policy set, want 7", pol.Lease)
	}
	var audit []auditRow
	decodeStrict(t, mustPG(t, qURL, "", "audit", "--json"), &audit)
	var kinds []string
	for _, a := range audit {
		kinds = append(kinds, a.Kind+":"+a.Reason)
	}
	if got := strings.Join(kinds, ","); got != "redrive:endpoint fixed,redrive:all fixed,policy:slower endpoint" {
		t.Errorf("audit = %s", got)
	}

	// The receiver: receive creates it elsewhere; here the library does.
	r, err := pgreceiverstore.OpenPool(ctx, pgtest.Pool(t), pgreceiverstore.WithSchema(rschema))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Receive(ctx, receiver.Message{ID: "x", Flow: "a", Seq: 1, Body: []byte(`{"delta":5}`)}); err != nil {
		t.Fatal(err)
	}
	var tot []totalRow
	decodeStrict(t, mustPG(t, qURL, rURL, "receiver", "totals", "--json"), &tot)
	if len(tot) != 1 || tot[0].Total != 5 {
		t.Errorf("receiver totals = %+v, want a: 5", tot)
	}
	var snap map[string]json.RawMessage
	if err := json.Unmarshal([]byte(mustPG(t, qURL, rURL, "snapshot")), &snap); err != nil || snap["queue"] == nil || snap["receiver"] == nil {
		t.Errorf("snapshot: %v, keys %v", err, snap)
	}
}

// waitFor calls ok until it returns true, failing the test after d (a
// watchdog for a broken build, not a measurement).
func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after %s for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startReceive starts 'relayctl receive' on a free loopback port and
// returns the child and the URL it printed.
func startReceive(t *testing.T, bin, receiverURL, secret string) (*child, string) {
	t.Helper()
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "receive", "--listen", "127.0.0.1:0", "--receiver", receiverURL, "--json")
	cmd.Env = append(os.Environ(), secretEnv+"="+secret)
	cmd.Stdout = w
	recv := start(t, "relayctl receive", cmd)
	w.Close()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("relayctl receive printed no URL: %v\n%s", err, recv.stderr)
	}
	u := strings.TrimSpace(line)
	if !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Fatalf("first line of relayctl receive = %q, want its URL", line)
	}
	return recv, u
}

// The end-to-end test on PostgreSQL with real processes on loopback: one
// 'relayctl receive --receiver postgres://…' and two 'relayctl relay
// --queue postgres://… --to URL --exit-when-idle' over one queue of 3,000
// events in 200 flows. Both relays exit 0 once the queue is drained; the
// receiver then holds every flow's exact total and next expected seq 16,
// no conflict, and one receipt per (flow, seq 1..15) under the event ID
// enqueued for it. The receiver accepts only a flow's next expected seq (a
// later one is a gap, answered without a receipt), so 1..15 all received
// means received in order.
// Each process warns once, at start, when its server's autovacuum is off.
func TestPostgres_EndToEnd_TwoRelaysOneReceiver(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: real processes, 3,000 events")
	}
	const (
		flows   = 200
		perFlow = 15
		secret  = "e2e-secret"
	)
	qs, qURL := pgQueueSchema(t)
	base, rschema := pgtest.Schema(t)
	rURL := pgURL(t, base, rschema)
	bin := buildRelayctl(t, t.TempDir())
	ctx := context.Background()

	evs, want, ids := e2eEvents(flows, perFlow)
	for i := 0; i < len(evs); i += 500 {
		if _, err := qs.EnqueueBatch(ctx, evs[i:i+500], 0); err != nil {
			t.Fatal(err)
		}
	}

	began := time.Now()
	recv, u := startReceive(t, bin, rURL, secret)
	var relays []*child
	for i := range 2 {
		cmd := exec.Command(bin, "relay", "--queue", qURL, "--to", u, "--secret", secret,
			"--exit-when-idle", "--concurrency", "8", "--json")
		cmd.Stdout = &syncBuffer{}
		relays = append(relays, start(t, fmt.Sprintf("relayctl relay #%d", i+1), cmd))
	}
	for _, r := range relays {
		r.wait(t, 5*time.Minute)
	}
	drained := time.Since(began)
	if err := recv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	recv.wait(t, time.Minute)
	t.Logf("PostgreSQL: %d events over %d flows, 2 relays, 1 receiver: drained in %s (%.0f events/s)",
		len(evs), flows, drained.Round(time.Millisecond), float64(len(evs))/drained.Seconds())
	for _, r := range relays {
		if !strings.Contains(r.stderr.String(), `"msg":"relay: idle: nothing dispatchable, in flight or waiting"`) {
			t.Errorf("%s did not log its idle exit:\n%s", r.name, r.stderr)
		}
		expectAutovacuumWarning(t, r)
	}
	expectAutovacuumWarning(t, recv)

	st, err := qs.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Events != (queue.EventCounts{Acked: int64(len(evs))}) {
		t.Errorf("queue events = %+v, want all %d acked", st.Events, len(evs))
	}
	r, err := pgreceiverstore.OpenPool(ctx, pgtest.Pool(t), pgreceiverstore.WithSchema(rschema))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := r.Flows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != flows {
		t.Fatalf("receiver flows = %d, want %d", len(fs), flows)
	}
	for _, f := range fs {
		if f.Total != want[f.Flow] || f.NextExpected != perFlow+1 {
			t.Errorf("flow %s: total %d, next %d; want %d, %d", f.Flow, f.Total, f.NextExpected, want[f.Flow], perFlow+1)
		}
	}
	if cs, err := r.Conflicts(ctx); err != nil || len(cs) != 0 {
		t.Errorf("conflicts = %d (%v), want none", len(cs), err)
	}
	snap, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Receipts) != len(evs) {
		t.Fatalf("receipts = %d, want %d", len(snap.Receipts), len(evs))
	}
	for _, rc := range snap.Receipts {
		if wantID := ids[fmt.Sprintf("%s/%d", rc.Flow, rc.Seq)]; rc.ID != wantID {
			t.Fatalf("flow %s seq %d received as %s, want %s", rc.Flow, rc.Seq, rc.ID, wantID)
		}
	}
}

// An idle relay on a PostgreSQL queue is woken by another process's
// enqueue: the relay polls once an hour (--poll 1h), so each of the events
// enqueued here while it sleeps can only be delivered within this test's
// life because the enqueue's NOTIFY woke it (wake.go). Each event is
// enqueued only once the relay is idle: the previous one delivered and
// acked, and every connection of the relay idle, one of them LISTENing.
// Before the last one the LISTEN connection is terminated on the server:
// the relay must listen again by itself, and not crash. At start it warns,
// once for its one server, when autovacuum is off there.
func TestPostgres_EnqueueWakesIdleRelay(t *testing.T) {
	if testing.Short() {
		t.Skip("real relay process")
	}
	qs, qURL := pgQueueSchema(t, pgqueuestore.WithNotifyInterval(0))
	base, rschema := pgtest.Schema(t)
	rURL := pgURL(t, base, rschema)
	const app = "fairrelay_wake_test"
	ru, err := url.Parse(qURL)
	if err != nil {
		t.Fatal(err)
	}
	relayURL := pgURL(t, base, ru.Query().Get("schema"), "application_name", app)
	bin := buildRelayctl(t, t.TempDir())
	ctx := context.Background()
	pool := pgtest.Pool(t)

	enqueue := func(seq int) {
		t.Helper()
		// The clock mark follows the relay's wall clock; enqueue at it. The
		// relay may record a later mark between the read and the enqueue
		// (it writes when it listens again): then read the mark again.
		for try := 1; ; try++ {
			st, err := qs.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = qs.Enqueue(ctx, queue.Event{ID: fmt.Sprintf("w%d", seq), Flow: "f", Body: []byte(`{"delta":1}`)}, st.ClockMark)
			if err == nil {
				break
			}
			if !errors.Is(err, queue.ErrTimeRegression) || try == 5 {
				t.Fatal(err)
			}
		}
	}
	var r *pgreceiverstore.Store
	delivered := func(seq int) func() bool {
		return func() bool {
			if r == nil {
				s, err := pgreceiverstore.OpenPool(ctx, pool, pgreceiverstore.WithSchema(rschema))
				if err != nil {
					return false // the relay has not created it yet
				}
				r = s
			}
			n, err := r.NextExpected(ctx, "f")
			return err == nil && n > int64(seq)
		}
	}
	idle := func() bool {
		st, err := qs.Stats(ctx)
		if err != nil || st.Events.Pending+st.Events.Inflight != 0 {
			return false
		}
		var busy, listening int
		err = pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state <> 'idle'),
			count(*) FILTER (WHERE state = 'idle' AND query LIKE 'LISTEN %')
			FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&busy, &listening)
		return err == nil && busy == 0 && listening == 1
	}

	enqueue(1)
	cmd := exec.Command(bin, "relay", "--queue", relayURL, "--receiver", rURL, "--poll", "1h", "--json")
	cmd.Stdout = &syncBuffer{}
	rl := start(t, "relayctl relay", cmd)
	waitFor(t, 2*time.Minute, "the first event's delivery", delivered(1))
	for seq := 2; seq <= 4; seq++ {
		waitFor(t, 2*time.Minute, "the relay to be idle and listening", idle)
		if seq == 4 {
			// Break the LISTEN connection: the relay listens again on a new
			// one (wakeOnNotify), and the next enqueue still wakes it.
			var pid int32
			if err := pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN %'`, app).Scan(&pid); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 2*time.Minute, "the relay to listen again", func() bool {
				var n int
				err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND pid <> $2 AND query LIKE 'LISTEN %'`, app, pid).Scan(&n)
				return err == nil && n == 1
			})
			waitFor(t, 2*time.Minute, "the relay to be idle and listening", idle)
		}
		at := time.Now()
		enqueue(seq)
		waitFor(t, 2*time.Minute, fmt.Sprintf("event %d's delivery (--poll 1h: only a wake-up delivers it)", seq), delivered(seq))
		t.Logf("event %d: enqueued to received in %s (as observed by 20 ms polling here; not asserted)", seq, time.Since(at).Round(time.Millisecond))
	}
	if err := rl.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rl.wait(t, time.Minute)
	if !strings.Contains(rl.stderr.String(), `"msg":"wake-ups: listener lost; relying on --poll until it is back"`) {
		t.Errorf("the relay did not log the lost listener:\n%s", rl.stderr)
	}
	// Queue and receiver are on one server: one warning.
	expectAutovacuumWarning(t, rl)
}

// expectAutovacuumWarning fails t unless c, a relayctl relay or receive
// with --json on stores of one PostgreSQL server, logged the autovacuum
// warning once when that server has autovacuum off (this project's
// machines do), and never when it is on.
func expectAutovacuumWarning(t *testing.T, c *child) {
	t.Helper()
	var av string
	if err := pgtest.Pool(t).QueryRow(context.Background(), `SHOW autovacuum`).Scan(&av); err != nil {
		t.Fatal(err)
	}
	want := 0
	if av == "off" {
		want = 1
	}
	if got := strings.Count(c.stderr.String(), `"level":"WARN","msg":"`+autovacuumWarning+`"`); got != want {
		t.Errorf("autovacuum %s: %s logged its warning %d times, want %d:\n%s", av, c.name, got, want, c.stderr)
	}
}
