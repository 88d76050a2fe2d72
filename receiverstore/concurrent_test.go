package receiverstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// docs/contract.md §1/§3: delivery is at-least-once, the effect exactly-once. Eight Store
// values on one file (as eight processes would hold) receive overlapping
// duplicates of one flow, each in its own shuffled order, until the flow is
// complete. Every delta is applied exactly once: one Accepted per message
// over all of them, and the total is the sum.
func TestConcurrentStores_EachDeltaAppliedExactlyOnce(t *testing.T) {
	t.Parallel()
	const stores, n = 8, 24
	path := filepath.Join(t.TempDir(), "receiver.db")
	msgs := make([]Message, n)
	var want int64
	for i := range msgs {
		msgs[i] = msg(fmt.Sprintf("e%d", i+1), "f", int64(i+1), i+1)
		want += int64(i + 1)
	}

	accepted := make([][]int, stores) // per store: how often each message was accepted
	errs := make([]error, stores)
	var wg sync.WaitGroup
	for w := range stores {
		s := reopen(t, path)
		accepted[w] = make([]int, n)
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			ctx := context.Background()
			// Each pass sends every message in a shuffled order. A pass always
			// includes the flow's next expected message, so it makes progress;
			// n passes are enough in the worst case.
			for pass := 0; pass < n; pass++ {
				next, err := s.NextExpected(ctx, "f")
				if err != nil {
					errs[w] = err
					return
				}
				if next == n+1 {
					return
				}
				for _, i := range r.Perm(n) {
					out, err := s.Receive(ctx, msgs[i])
					if err != nil {
						errs[w] = err
						return
					}
					switch out {
					case Accepted:
						accepted[w][i]++
					case Duplicate, Gap:
					default:
						errs[w] = fmt.Errorf("Receive(%s) = %q, want accepted, duplicate or gap", msgs[i].ID, out)
						return
					}
				}
			}
			errs[w] = fmt.Errorf("store %d: flow not complete after %d passes", w, n)
		})
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("store %d: %v", w, err)
		}
	}
	for i := range n {
		sum := 0
		for w := range stores {
			sum += accepted[w][i]
		}
		if sum != 1 {
			t.Errorf("message %s accepted %d times over all stores, want 1", msgs[i].ID, sum)
		}
	}
	s := reopen(t, path)
	sn := snap(t, s)
	if len(sn.Receipts) != n || len(sn.Conflicts) != 0 {
		t.Fatalf("receipts = %d, conflicts = %d; want %d, 0", len(sn.Receipts), len(sn.Conflicts), n)
	}
	if got := total(t, s, "f"); got != want {
		t.Fatalf("Total(f) = %d, want %d", got, want)
	}
}

const workerEnv = "RECEIVERSTORE_TEST_WORKER_DB"

// TestHelperWorker is not a test: run as a child with workerEnv set, it
// receives the messages of workerMessages in passes of a shuffled order until
// the flow is complete, and prints which it accepted, as JSON.
func TestHelperWorker(t *testing.T) {
	path := os.Getenv(workerEnv)
	if path == "" {
		t.Skip("helper process for TestProcesses_EachDeltaAppliedExactlyOnce")
	}
	seed, _ := strconv.ParseUint(os.Getenv(workerEnv+"_SEED"), 10, 64)
	s, err := Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ms := workerMessages()
	r := rand.New(rand.NewPCG(seed, 7))
	ctx := context.Background()
	var accepted []string
	for pass := 0; pass <= len(ms); pass++ {
		next, err := s.NextExpected(ctx, "f")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if next == int64(len(ms))+1 {
			_ = json.NewEncoder(os.Stdout).Encode(accepted)
			os.Exit(0)
		}
		for _, i := range r.Perm(len(ms)) {
			out, err := s.Receive(ctx, ms[i])
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			if out == Accepted {
				accepted = append(accepted, ms[i].ID)
			}
		}
	}
	fmt.Fprintln(os.Stderr, "flow not complete")
	os.Exit(2)
}

func workerMessages() []Message {
	ms := make([]Message, 12)
	for i := range ms {
		ms[i] = msg(fmt.Sprintf("e%d", i+1), "f", int64(i+1), i+1)
	}
	return ms
}

// docs/contract.md §1/§3 across real processes: four OS processes receive overlapping
// duplicates of one flow into one file; every message is accepted by exactly
// one of them and the total is the sum of the deltas.
func TestProcesses_EachDeltaAppliedExactlyOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts child processes")
	}
	const procs = 4
	path := filepath.Join(t.TempDir(), "receiver.db")
	s := reopen(t, path) // creates the schema before the children race
	outs := make([][]byte, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for p := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWorker$")
		cmd.Env = append(os.Environ(), workerEnv+"="+path, fmt.Sprintf("%s_SEED=%d", workerEnv, p))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		wg.Go(func() {
			outs[p], errs[p] = cmd.Output()
			if errs[p] != nil {
				errs[p] = fmt.Errorf("%w: %s", errs[p], stderr.String())
			}
		})
	}
	wg.Wait()
	count := map[string]int{}
	for p := range procs {
		if errs[p] != nil {
			t.Fatalf("process %d: %v", p, errs[p])
		}
		// The child exits before the test framework prints anything more;
		// take the line holding the JSON list in case something came first.
		var line []byte
		for l := range bytes.Lines(outs[p]) {
			if bytes.HasPrefix(l, []byte("[")) || bytes.HasPrefix(l, []byte("null")) {
				line = l
				break
			}
		}
		var ids []string
		if err := json.Unmarshal(line, &ids); err != nil {
			t.Fatalf("process %d output %q: %v", p, outs[p], err)
		}
		for _, id := range ids {
			count[id]++
		}
	}
	var want int64
	for _, m := range workerMessages() {
		if count[m.ID] != 1 {
			t.Errorf("message %s accepted %d times over all processes, want 1", m.ID, count[m.ID])
		}
		want += int64(m.Seq)
	}
	if got := total(t, s, "f"); got != want {
		t.Fatalf("Total(f) = %d, want %d", got, want)
	}
}
