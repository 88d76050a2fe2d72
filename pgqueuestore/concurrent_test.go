package pgqueuestore

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// helperEnv switches the test binary into a child role (see TestMain).
const helperEnv = "PGQUEUESTORE_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "claimant":
		os.Exit(claimantProcess(os.Getenv("PGQUEUESTORE_TEST_URL"), os.Getenv("PGQUEUESTORE_TEST_SCHEMA")))
	case "crash":
		os.Exit(crashProcess(os.Getenv("PGQUEUESTORE_TEST_URL"), os.Getenv("PGQUEUESTORE_TEST_SCHEMA"),
			queue.HookPoint(os.Getenv("PGQUEUESTORE_TEST_POINT"))))
	default:
		fmt.Fprintf(os.Stderr, "unknown helper role %q\n", os.Getenv(helperEnv))
		os.Exit(2)
	}
}

// claimRecord is one claim a claimant made, as it reports it.
type claimRecord struct {
	EventID    string `json:"event_id"`
	Flow       string `json:"flow"`
	Seq        int64  `json:"seq"`
	Generation int64  `json:"generation"`
	Ticket     int64  `json:"ticket"`
	Outcome    string `json:"outcome"`
}

// drain claims and acks at tick 0 until every event is acked. At one tick
// no lease expires, so every event must be claimed exactly once across all
// claimants. Nothing to claim while events remain means other claimants
// hold every ready head: the claimant polls again after a millisecond (a
// poll, not a timed assertion).
func drain(ctx context.Context, s *Store, total int64, report func(claimRecord)) error {
	for {
		c, ok, err := s.Claim(ctx, 0)
		if err != nil {
			return err
		}
		if !ok {
			st, err := s.Stats(ctx)
			if err != nil {
				return err
			}
			if st.Events.Acked == total {
				return nil
			}
			time.Sleep(time.Millisecond)
			continue
		}
		o, err := s.Settle(ctx, c.EventID, c.Generation, queue.Result{OK: true}, 0)
		if err != nil {
			return err
		}
		report(claimRecord{EventID: c.EventID, Flow: c.Flow, Seq: c.Seq, Generation: c.Generation, Ticket: c.Ticket, Outcome: string(o)})
	}
}

func claimantProcess(url, schema string) int {
	ctx := context.Background()
	s, err := Open(ctx, url, WithSchema(schema))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	var total int64
	if _, err := fmt.Sscan(os.Getenv("PGQUEUESTORE_TEST_TOTAL"), &total); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	enc := json.NewEncoder(os.Stdout)
	if err := drain(ctx, s, total, func(r claimRecord) { enc.Encode(r) }); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// loadBacklog enqueues flows × perFlow events at tick 0.
func loadBacklog(t testing.TB, s *Store, flows, perFlow int) int64 {
	t.Helper()
	var es []queue.Event
	for k := 0; k < perFlow; k++ {
		for f := 0; f < flows; f++ {
			es = append(es, queue.Event{ID: fmt.Sprintf("f%03d-%03d", f, k), Flow: fmt.Sprintf("f%03d", f), Body: []byte("x")})
		}
	}
	if _, err := s.EnqueueBatch(context.Background(), es, 0); err != nil {
		t.Fatalf("EnqueueBatch() error = %v", err)
	}
	return int64(len(es))
}

// checkExactlyOnce checks the claims of all claimants and the final store:
// every event claimed and acked exactly once, tickets 1..N without a gap or
// a repeat, each flow's events claimed in sequence order (tickets grow with
// seq), every flow served exactly its number of events.
func checkExactlyOnce(t *testing.T, s *Store, records []claimRecord, total int64, flows, perFlow int) {
	t.Helper()
	if int64(len(records)) != total {
		t.Fatalf("claims = %d, want %d (one per event)", len(records), total)
	}
	byEvent := map[string]int{}
	byTicket := map[int64]string{}
	lastTicket := map[string]int64{} // flow -> ticket of its claim of seq-1
	bySeq := map[string]map[int64]int64{}
	for _, r := range records {
		byEvent[r.EventID]++
		if prev, dup := byTicket[r.Ticket]; dup {
			t.Fatalf("ticket %d handed out twice: %s and %s", r.Ticket, prev, r.EventID)
		}
		byTicket[r.Ticket] = r.EventID
		if r.Generation != 1 || r.Outcome != string(queue.Acked) {
			t.Fatalf("claim %+v: want generation 1 and outcome acked", r)
		}
		if bySeq[r.Flow] == nil {
			bySeq[r.Flow] = map[int64]int64{}
		}
		bySeq[r.Flow][r.Seq] = r.Ticket
	}
	for id, n := range byEvent {
		if n != 1 {
			t.Fatalf("event %s claimed %d times, want 1", id, n)
		}
	}
	for k := int64(1); k <= total; k++ {
		if _, ok := byTicket[k]; !ok {
			t.Fatalf("ticket %d never handed out", k)
		}
	}
	for f, seqs := range bySeq {
		for seq := int64(1); seq <= int64(perFlow); seq++ {
			tk, ok := seqs[seq]
			if !ok || tk <= lastTicket[f] {
				t.Fatalf("flow %s: seq %d claimed with ticket %d (claimed: %v) after ticket %d", f, seq, tk, ok, lastTicket[f])
			}
			lastTicket[f] = tk
		}
	}
	sn, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sn.Ticket != total {
		t.Fatalf("store ticket = %d, want %d", sn.Ticket, total)
	}
	for _, e := range sn.Events {
		if e.State != queue.StateAcked || e.Generation != 1 || e.LifetimeAttempts != 1 {
			t.Fatalf("event %s = %+v, want acked once", e.ID, e)
		}
	}
	if len(sn.Flows) != flows {
		t.Fatalf("flows = %d, want %d", len(sn.Flows), flows)
	}
	for _, f := range sn.Flows {
		if f.Served != int64(perFlow) || f.HeadSeq != nil {
			t.Fatalf("flow %s = %+v, want served %d and no head", f.Flow, f, perFlow)
		}
	}
}

// Eight Store values (each with its own pool) in one process, one goroutine
// each, claim and ack one backlog: no double claim, no lost update, no
// serialization error.
func TestConcurrency_EightStoresExactlyOnce(t *testing.T) {
	t.Parallel()
	const claimants, flows, perFlow = 8, 12, 8
	s, url, schema := open(t)
	total := loadBacklog(t, s, flows, perFlow)
	var mu sync.Mutex
	var records []claimRecord
	errs := make([]error, claimants)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range claimants {
		wg.Go(func() {
			si, err := Open(context.Background(), url, WithSchema(schema))
			if err != nil {
				errs[i] = err
				return
			}
			defer si.Close()
			<-start
			errs[i] = drain(context.Background(), si, total, func(r claimRecord) {
				mu.Lock()
				records = append(records, r)
				mu.Unlock()
			})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("claimant %d error = %v", i, err)
		}
	}
	checkExactlyOnce(t, s, records, total, flows, perFlow)
}

// The same with eight OS processes (this test binary re-executed as a
// claimant) started together on one schema.
func TestConcurrency_EightProcessesExactlyOnce(t *testing.T) {
	t.Parallel()
	const claimants, flows, perFlow = 8, 12, 8
	s, url, schema := open(t)
	total := loadBacklog(t, s, flows, perFlow)
	checkExactlyOnce(t, s, runClaimants(t, url, schema, claimants, total), total, flows, perFlow)
}

// The same under the rotation order with weights 1, 2 and 3 (docs/contract.md
// §7.6): eight processes claim and ack one backlog; every event is claimed
// exactly once, each flow in sequence order, tickets without a gap; each
// flow arrived once (joins = flows: its backlog never emptied before its
// last ack), kept its weight, and no flow's pass is beyond vtail.
func TestConcurrency_EightProcessesRotationExactlyOnce(t *testing.T) {
	t.Parallel()
	const claimants, flows, perFlow = 8, 12, 8
	s, url, schema := open(t, WithPolicy(rotationPolicy()))
	var es []queue.Event
	for k := 0; k < perFlow; k++ {
		for f := 0; f < flows; f++ {
			es = append(es, queue.Event{ID: fmt.Sprintf("f%03d-%03d", f, k), Flow: fmt.Sprintf("f%03d", f), Body: []byte("x"), Weight: 1 + f%3})
		}
	}
	if _, err := s.EnqueueBatch(context.Background(), es, 0); err != nil {
		t.Fatal(err)
	}
	total := int64(len(es))
	checkExactlyOnce(t, s, runClaimants(t, url, schema, claimants, total), total, flows, perFlow)
	sn, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sn.Rotation == nil || sn.Rotation.Joins != flows {
		t.Fatalf("rotation = %+v, want %d joins", sn.Rotation, flows)
	}
	for i, f := range sn.Flows {
		if f.Weight != 1+i%3 || f.Pass == nil || *f.Pass > sn.Rotation.VTail || *f.Pass <= 0 {
			t.Fatalf("flow %s: weight %d pass %v, want weight %d and 0 < pass <= vtail %d", f.Flow, f.Weight, f.Pass, 1+i%3, sn.Rotation.VTail)
		}
	}
}

// runClaimants runs n claimant processes on the schema until total events
// are acked and returns every claim they report.
func runClaimants(t *testing.T, url, schema string, n int, total int64) []claimRecord {
	t.Helper()
	cmds := make([]*exec.Cmd, n)
	outs := make([]*strings.Builder, n)
	errOuts := make([]*strings.Builder, n)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"=claimant", "PGQUEUESTORE_TEST_URL="+url,
			"PGQUEUESTORE_TEST_SCHEMA="+schema, fmt.Sprintf("PGQUEUESTORE_TEST_TOTAL=%d", total))
		outs[i], errOuts[i] = &strings.Builder{}, &strings.Builder{}
		cmd.Stdout, cmd.Stderr = outs[i], errOuts[i]
		cmds[i] = cmd
	}
	for i, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			t.Fatalf("start claimant %d: %v", i, err)
		}
	}
	var records []claimRecord
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("claimant %d: %v\nstderr: %s", i, err, errOuts[i])
		}
		sc := bufio.NewScanner(strings.NewReader(outs[i].String()))
		for sc.Scan() {
			var r claimRecord
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("claimant %d: bad line %q: %v", i, sc.Text(), err)
			}
			records = append(records, r)
		}
	}
	return records
}

// crashProcess opens the store with a hook that exits with status 73 at
// point, then runs the operation that passes it.
func crashProcess(url, schema string, point queue.HookPoint) int {
	ctx := context.Background()
	s, err := Open(ctx, url, WithSchema(schema), WithHook(func(p queue.HookPoint) {
		if p == point {
			os.Exit(73)
		}
	}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	now := clock.Tick(100)
	switch point {
	case queue.HookEnqueueSeqTaken:
		_, err = s.Enqueue(ctx, queue.Event{ID: "new", Flow: "a", Body: []byte("x")}, now)
	case queue.HookClaimCommitted:
		_, _, err = s.Claim(ctx, now)
	case queue.HookSettleBeforeCommit:
		var c queue.Claim
		var ok bool
		if c, ok, err = s.Claim(ctx, now); err == nil && ok {
			_, err = s.Settle(ctx, c.EventID, c.Generation, queue.Result{OK: true}, now)
		}
	case queue.HookRedriveBeforeAudit:
		var q []queue.QuarantinedEvent
		if q, err = s.Quarantined(ctx); err == nil && len(q) > 0 {
			err = s.Redrive(ctx, q[0].EventID, q[0].Generation, "operator", now)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0 // the hook did not fire
}

// A process killed with status 73 at each hook point leaves the store
// consistent: the server rolls back the transaction it was in, so nothing
// of it is kept; after a claim's commit, the claim is kept.
func TestCrash_HookPointsInRealProcesses(t *testing.T) {
	t.Parallel()
	for _, point := range []queue.HookPoint{queue.HookEnqueueSeqTaken, queue.HookClaimCommitted, queue.HookSettleBeforeCommit, queue.HookRedriveBeforeAudit} {
		t.Run(string(point), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, url, schema := open(t)
			if _, err := s.Enqueue(ctx, queue.Event{ID: "q1", Flow: "q", Body: []byte("x")}, 0); err != nil {
				t.Fatal(err)
			}
			// Three failed attempts at ticks 0, 2 and 6 (backoff 2, 4)
			// quarantine q1.
			for _, now := range []clock.Tick{0, 2, 6} {
				c, ok, err := s.Claim(ctx, now)
				if err != nil || !ok {
					t.Fatalf("claim at %d: %v %v", now, ok, err)
				}
				if _, err := s.Settle(ctx, c.EventID, c.Generation, queue.Result{Reason: "unavailable"}, now); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Enqueue(ctx, queue.Event{ID: "a1", Flow: "a", Body: []byte("x")}, 50); err != nil {
				t.Fatal(err)
			}
			before, err := s.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(before.Events) != 2 || before.Events[1].State != queue.StateQuarantined {
				t.Fatalf("setup: %+v", before.Events)
			}

			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), helperEnv+"=crash", "PGQUEUESTORE_TEST_URL="+url,
				"PGQUEUESTORE_TEST_SCHEMA="+schema, "PGQUEUESTORE_TEST_POINT="+string(point))
			out, err := cmd.CombinedOutput()
			if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 73 {
				t.Fatalf("child exit = %v (%v), want status 73; output: %s", cmd.ProcessState, err, out)
			}
			after, err := s.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if point == queue.HookClaimCommitted || point == queue.HookSettleBeforeCommit {
				// The claim committed before the crash (the settle, if any,
				// had not): it is kept, and nothing else happened.
				e, err := s.Event(ctx, "a1")
				if err != nil || e.State != queue.StateInflight || e.Generation != 1 || after.Ticket != before.Ticket+1 || after.ClockMark != 100 {
					t.Fatalf("after the crash: a1 = %+v (%v), ticket %d; want the claim kept and no settle", e, err, after.Ticket)
				}
				return
			}
			if !reflect.DeepEqual(before, after) {
				t.Fatalf("crash at %s changed the store:\nbefore %+v\nafter  %+v", point, before, after)
			}
		})
	}
}
