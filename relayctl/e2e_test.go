package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/queue"
	"github.com/fairrelay/fairrelay/queuestore"
	"github.com/fairrelay/fairrelay/receiverstore"
)

// buildRelayctl builds this command as a real binary (no race detector, no
// test harness) into dir.
func buildRelayctl(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "relayctl")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	cmd := exec.Command(gobin, "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// syncBuffer is a bytes.Buffer safe for a child's output and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// child is a started relayctl process.
type child struct {
	name   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{} // closed once Wait has returned (err then holds its error)
	err    error
}

func start(t *testing.T, name string, cmd *exec.Cmd) *child {
	t.Helper()
	c := &child{name: name, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = c.stderr
	if cmd.Stdout == nil {
		cmd.Stdout = c.stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { c.err = cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

// wait waits for the child's exit, at most d, and fails unless it is 0.
func (c *child) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-c.done:
		if c.err != nil {
			t.Fatalf("%s: %v\n%s", c.name, c.err, c.stderr)
		}
	case <-time.After(d):
		_ = c.cmd.Process.Kill()
		t.Fatalf("%s still running after %s\n%s", c.name, d, c.stderr)
	}
}

// The end-to-end test with real processes on loopback: one 'relayctl
// receive' and two 'relayctl relay --to URL --exit-when-idle' over one
// queue of 10,000 events in 500 flows. Both relays exit 0 once the queue is
// drained; the receiver then holds every flow's exact total, and every flow
// was received 1..20 in order (receipts in commit order), each seq under
// the event ID that was enqueued for it.
func TestEndToEnd_TwoRelaysOneReceiver(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: real processes, 10,000 events")
	}
	const (
		flows   = 500
		perFlow = 20
		secret  = "e2e-secret"
	)
	dir := t.TempDir()
	bin := buildRelayctl(t, dir)
	queuePath, receiverPath := filepath.Join(dir, "queue.db"), filepath.Join(dir, "receiver.db")
	ctx := context.Background()

	// 10,000 events, flows interleaved, deltas 1..1000.
	q, err := queuestore.Open(queuePath)
	if err != nil {
		t.Fatal(err)
	}
	evs, want, ids := e2eEvents(flows, perFlow)
	for i := 0; i < len(evs); i += 1000 {
		if _, err := q.EnqueueBatch(ctx, evs[i:i+1000], 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	recvOut, recvW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	rcmd := exec.Command(bin, "receive", "--listen", "127.0.0.1:0", "--receiver", receiverPath)
	rcmd.Env = append(os.Environ(), secretEnv+"="+secret)
	rcmd.Stdout = recvW
	recv := start(t, "relayctl receive", rcmd)
	recvW.Close()
	line, err := bufio.NewReader(recvOut).ReadString('\n')
	if err != nil {
		t.Fatalf("relayctl receive printed no URL: %v\n%s", err, recv.stderr)
	}
	url := strings.TrimSpace(line)
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("first line of relayctl receive = %q, want its URL", line)
	}

	var relays []*child
	for i := range 2 {
		out := &syncBuffer{}
		cmd := exec.Command(bin, "relay", "--queue", queuePath, "--to", url, "--secret", secret,
			"--exit-when-idle", "--concurrency", "16", "--json")
		cmd.Stdout = out
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
	t.Logf("10,000 events over 500 flows, 2 relays, 1 receiver: drained in %s (%.0f events/s)",
		drained.Round(time.Millisecond), float64(len(evs))/drained.Seconds())
	for _, r := range relays {
		if !strings.Contains(r.stderr.String(), `"msg":"relay: idle: nothing dispatchable, in flight or waiting"`) {
			t.Errorf("%s did not log its idle exit:\n%s", r.name, r.stderr)
		}
	}

	// The queue: every event acked, nothing left.
	q, err = queuestore.Open(queuePath)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Events != (queuestore.EventCounts{Acked: int64(len(evs))}) {
		t.Errorf("queue events = %+v, want all %d acked", st.Events, len(evs))
	}

	// The receiver: exact totals, no conflicts.
	r, err := receiverstore.Open(receiverPath)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
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

	// Every flow received 1..n in order: the receipts' commit order (rowid)
	// within each flow is seq 1, 2, ..., each under its enqueued ID.
	db, err := sql.Open("sqlite", "file:"+receiverPath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT flow, seq, id FROM receipts ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	next := make(map[string]int64, flows)
	n := 0
	for rows.Next() {
		var (
			flow, id string
			seq      int64
		)
		if err := rows.Scan(&flow, &seq, &id); err != nil {
			t.Fatal(err)
		}
		if seq != next[flow]+1 {
			t.Fatalf("flow %s: receipt of seq %d after seq %d", flow, seq, next[flow])
		}
		if wantID := ids[fmt.Sprintf("%s/%d", flow, seq)]; id != wantID {
			t.Fatalf("flow %s seq %d received as %s, want %s", flow, seq, id, wantID)
		}
		next[flow] = seq
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(evs) {
		t.Fatalf("receipts = %d, want %d", n, len(evs))
	}
}

// e2eEvents makes the end-to-end tests' events: perFlow events in each of
// flows flows ("tenant-000" …), flows interleaved, deltas 1..1000; with each
// flow's expected total and the event ID of each flow/seq.
func e2eEvents(flows, perFlow int) (evs []queue.Event, want map[string]int64, ids map[string]string) {
	want = make(map[string]int64, flows)
	ids = make(map[string]string, flows*perFlow) // flow/seq -> event ID
	for s := 1; s <= perFlow; s++ {
		for f := range flows {
			flow := fmt.Sprintf("tenant-%03d", f)
			delta := int64((f*perFlow+s)*7919%1000 + 1)
			id := fmt.Sprintf("ev-%03d-%02d", f, s)
			evs = append(evs, queue.Event{ID: id, Flow: flow, Body: fmt.Appendf(nil, `{"delta":%d}`, delta)})
			want[flow] += delta
			ids[fmt.Sprintf("%s/%d", flow, s)] = id
		}
	}
	return evs, want, ids
}
