package queuestore

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/clock"
)

// helperEnv switches the test binary into a child role (see TestMain).
const helperEnv = "QUEUESTORE_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "claimant":
		os.Exit(claimantProcess(os.Getenv("QUEUESTORE_TEST_DB")))
	case "crash":
		os.Exit(crashProcess(os.Getenv("QUEUESTORE_TEST_DB"), HookPoint(os.Getenv("QUEUESTORE_TEST_POINT"))))
	default:
		fmt.Fprintf(os.Stderr, "unknown helper role %q\n", os.Getenv(helperEnv))
		os.Exit(2)
	}
}

// claimRecord is one claim a claimant made, as it reports it.
type claimRecord struct {
	EventID    string `json:"event_id"`
	Generation int64  `json:"generation"`
	Ticket     int64  `json:"ticket"`
	Outcome    string `json:"outcome"`
}

// drain claims and acks at tick 0 until every event of the store is acked.
// At one tick no lease ever expires, so every event must be claimed exactly
// once across all claimants. Claim returning false while events remain
// means other claimants hold every ready head: the claimant waits briefly
// and tries again (that wait is not a timed assertion, only a poll).
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
		o, err := s.Settle(ctx, c.EventID, c.Generation, Result{OK: true}, 0)
		if err != nil {
			return err
		}
		report(claimRecord{EventID: c.EventID, Generation: c.Generation, Ticket: c.Ticket, Outcome: string(o)})
	}
}

func claimantProcess(path string) int {
	ctx := context.Background()
	s, err := Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	var total int64
	if _, err := fmt.Sscan(os.Getenv("QUEUESTORE_TEST_TOTAL"), &total); err != nil {
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
	var es []Event
	for k := 0; k < perFlow; k++ {
		for f := 0; f < flows; f++ {
			es = append(es, Event{ID: fmt.Sprintf("f%03d-%03d", f, k), Flow: fmt.Sprintf("f%03d", f), Body: []byte("x")})
		}
	}
	if _, err := s.EnqueueBatch(context.Background(), es, 0); err != nil {
		t.Fatalf("EnqueueBatch() error = %v", err)
	}
	return int64(len(es))
}

// checkExactlyOnce checks the claims of all claimants and the final store:
// every event claimed and acked exactly once, tickets 1..N without a gap or a
// repeat, every flow served exactly its number of events.
func checkExactlyOnce(t *testing.T, s *Store, records []claimRecord, total int64, flows, perFlow int) {
	t.Helper()
	if int64(len(records)) != total {
		t.Fatalf("claims = %d, want %d (one per event)", len(records), total)
	}
	byEvent := map[string]int{}
	byTicket := map[int64]string{}
	for _, r := range records {
		byEvent[r.EventID]++
		if prev, dup := byTicket[r.Ticket]; dup {
			t.Fatalf("ticket %d handed out twice: %s and %s", r.Ticket, prev, r.EventID)
		}
		byTicket[r.Ticket] = r.EventID
		if r.Generation != 1 || r.Outcome != string(Acked) {
			t.Fatalf("claim %+v: want generation 1 and outcome acked", r)
		}
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
	sn := snap(t, s)
	if sn.Ticket != total {
		t.Fatalf("store ticket = %d, want %d", sn.Ticket, total)
	}
	for _, e := range sn.Events {
		if e.State != stateAcked || e.Generation != 1 || e.LifetimeAttempts != 1 {
			t.Fatalf("event %s = %s, want acked once", e.ID, jsonOf(e))
		}
	}
	if len(sn.Flows) != flows {
		t.Fatalf("flows = %d, want %d", len(sn.Flows), flows)
	}
	for _, f := range sn.Flows {
		if f.Served != int64(perFlow) || f.HeadSeq != nil {
			t.Fatalf("flow %s = %s, want served %d and no head", f.Flow, jsonOf(f), perFlow)
		}
	}
	var integrity string
	if err := s.db.QueryRow("PRAGMA integrity_check").Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("integrity_check = %q, %v; want ok", integrity, err)
	}
}

// docs/contract.md §2: eight Store values on one file, one goroutine each, claim
// and ack one backlog: no double claim, no lost update, no SQLITE_BUSY.
func TestConcurrency_2_7_EightStoresExactlyOnce(t *testing.T) {
	t.Parallel()
	const claimants, flows, perFlow = 8, 12, 8
	path := filepath.Join(t.TempDir(), "queue.db")
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer s.Close()
	total := loadBacklog(t, s, flows, perFlow)

	var mu sync.Mutex
	var records []claimRecord
	errs := make([]error, claimants)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < claimants; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			si, err := Open(path)
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
		}(i)
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

// docs/contract.md §2: the same with eight OS processes (this test binary
// re-executed as a claimant) started together on one file.
func TestConcurrency_2_7_EightProcessesExactlyOnce(t *testing.T) {
	t.Parallel()
	const claimants, flows, perFlow = 8, 12, 8
	path := filepath.Join(t.TempDir(), "queue.db")
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer s.Close()
	total := loadBacklog(t, s, flows, perFlow)

	cmds := make([]*exec.Cmd, claimants)
	outs := make([]*strings.Builder, claimants)
	errOuts := make([]*strings.Builder, claimants)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"=claimant", "QUEUESTORE_TEST_DB="+path,
			fmt.Sprintf("QUEUESTORE_TEST_TOTAL=%d", total))
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
	checkExactlyOnce(t, s, records, total, flows, perFlow)
}

// crashProcess opens the store with a hook that exits with status 73 at
// point, then runs the operation that passes it.
func crashProcess(path string, point HookPoint) int {
	ctx := context.Background()
	s, err := Open(path, WithHook(func(p HookPoint) {
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
	case HookEnqueueSeqTaken:
		_, err = s.Enqueue(ctx, Event{ID: "new", Flow: "a", Body: []byte("x")}, now)
	case HookClaimCommitted:
		_, _, err = s.Claim(ctx, now)
	case HookSettleBeforeCommit:
		var c Claim
		var ok bool
		if c, ok, err = s.Claim(ctx, now); err == nil && ok {
			_, err = s.Settle(ctx, c.EventID, c.Generation, Result{OK: true}, now)
		}
	case HookRedriveBeforeAudit:
		var q []QuarantinedEvent
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

// docs/contract.md §4 with §2.7: a process killed at each hook point leaves the store
// consistent: inside a transaction nothing of it is kept; after a claim's
// commit, the claim is kept.
func TestCrash_2_7_HookPointsInRealProcesses(t *testing.T) {
	t.Parallel()
	for _, point := range []HookPoint{HookEnqueueSeqTaken, HookClaimCommitted, HookSettleBeforeCommit, HookRedriveBeforeAudit} {
		t.Run(string(point), func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "queue.db")
			s, err := Open(path)
			if err != nil {
				t.Fatalf("Open() error = %v", err)
			}
			defer s.Close()
			enqueue(t, s, "q1", "q", "x", 0)
			quarantineHead(t, s, 0)
			enqueue(t, s, "a1", "a", "x", 50)
			before := snap(t, s)

			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), helperEnv+"=crash", "QUEUESTORE_TEST_DB="+path, "QUEUESTORE_TEST_POINT="+string(point))
			out, err := cmd.CombinedOutput()
			if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 73 {
				t.Fatalf("child exit = %v (%v), want status 73; output: %s", cmd.ProcessState, err, out)
			}
			after := snap(t, s)
			if point == HookClaimCommitted || point == HookSettleBeforeCommit {
				// The claim committed before the crash (the settle, if any,
				// had not): it is kept, and nothing else happened.
				e := event(t, s, "a1")
				if e.State != stateInflight || e.Generation != 1 || after.Ticket != before.Ticket+1 || after.ClockMark != 100 {
					t.Fatalf("after the crash: a1 = %s, ticket %d; want the claim kept and no settle", jsonOf(e), after.Ticket)
				}
			} else {
				assertUnchanged(t, "crash at "+string(point), before, after)
			}
			var integrity string
			if err := s.db.QueryRow("PRAGMA integrity_check").Scan(&integrity); err != nil || integrity != "ok" {
				t.Fatalf("integrity_check = %q, %v; want ok", integrity, err)
			}
		})
	}
}
