package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// A Claimant is one process's view of a shared backlog: Claim takes the next
// item (ok is false when nothing is left), Settle finishes it. Each is one
// write transaction.
type Claimant interface {
	Claim(ctx context.Context) (item any, ok bool, err error)
	Settle(ctx context.Context, item any) error
}

// A SettleClaimant is a Claimant that can also settle an item and claim the
// next in one call (one transaction), as a relay does with
// SettleClaimBatch; Drain then makes that one call for every item after the
// first. ok is false when nothing more was dispatchable; the item is
// settled all the same.
type SettleClaimant interface {
	Claimant
	SettleClaim(ctx context.Context, item any) (next any, ok bool, err error)
}

// A Batch is a claimed item that stands for several events (a ClaimBatch's
// claims): Drain counts Len events when it is settled, 1 for any other item.
type Batch interface{ Len() int }

func itemCount(item any) int {
	if b, ok := item.(Batch); ok {
		return b.Len()
	}
	return 1
}

// ProcStats is what one claimant process reports after a drain.
type ProcStats struct {
	Proc      int           `json:"proc"`
	Events    int           `json:"events"`     // claimed and settled (events, not batches)
	Writes    int           `json:"writes"`     // write calls that returned
	Busy      int           `json:"busy"`       // write calls that returned SQLITE_BUSY
	OtherErrs int           `json:"other_errs"` // any other error
	FirstErr  string        `json:"first_err,omitempty"`
	MaxWrite  time.Duration `json:"max_write_ns"` // longest single write call, waiting included
	Elapsed   time.Duration `json:"elapsed_ns"`
	Empty     bool          `json:"empty"` // stopped because the backlog was empty
}

// Drain runs c until d has passed or the backlog is empty, timing every write
// call. An SQLITE_BUSY or other error is counted and the loop goes on (a relay
// would retry on its next turn); a settle that failed is retried once per turn
// until it succeeds, so no claimed item is lost from the count.
func Drain(ctx context.Context, c Claimant, proc int, d time.Duration) ProcStats {
	st := ProcStats{Proc: proc}
	start := time.Now()
	timed := func(f func() error) error {
		t0 := time.Now()
		err := f()
		if w := time.Since(t0); w > st.MaxWrite {
			st.MaxWrite = w
		}
		st.Writes++
		switch {
		case err == nil:
		case IsBusy(err):
			st.Busy++
		default:
			st.OtherErrs++
			if st.FirstErr == "" {
				st.FirstErr = err.Error()
			}
		}
		return err
	}
	var pending any
	for time.Since(start) < d && ctx.Err() == nil {
		if sc, both := c.(SettleClaimant); pending != nil && both {
			var next any
			var ok bool
			if timed(func() error {
				var err error
				next, ok, err = sc.SettleClaim(ctx, pending)
				return err
			}) == nil {
				st.Events += itemCount(pending)
				pending = nil
				if ok {
					pending = next
				}
			} else if st.OtherErrs > 100 {
				break
			}
			continue
		}
		if pending != nil {
			if timed(func() error { return c.Settle(ctx, pending) }) == nil {
				st.Events += itemCount(pending)
				pending = nil
			}
			continue
		}
		var item any
		var ok bool
		err := timed(func() error {
			var err error
			item, ok, err = c.Claim(ctx)
			return err
		})
		if err != nil {
			if st.OtherErrs > 100 {
				break
			}
			continue
		}
		if !ok {
			st.Empty = true
			break
		}
		pending = item
	}
	st.Elapsed = time.Since(start)
	return st
}

// ChildEnv names the environment variables a drain child reads.
const (
	EnvProc = "FAIRRELAY_BENCH_PROC"
	EnvFor  = "FAIRRELAY_BENCH_FOR" // a time.Duration
)

// ChildDrain is the child side of [SpawnDrain]: it reads its number and the
// drain's duration from the environment, says "ready" on stdout, waits for
// the parent to close its stdin (the common start), drains with c and prints
// its ProcStats as one JSON line on stdout. Open the stores before calling it,
// so that start-up costs no process its share.
func ChildDrain(ctx context.Context, c Claimant) error {
	proc, err := strconv.Atoi(os.Getenv(EnvProc))
	if err != nil {
		return fmt.Errorf("child: %s: %w", EnvProc, err)
	}
	d, err := time.ParseDuration(os.Getenv(EnvFor))
	if err != nil {
		return fmt.Errorf("child: %s: %w", EnvFor, err)
	}
	if _, err := os.Stdout.WriteString("ready\n"); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		return fmt.Errorf("child: waiting for the start: %w", err)
	}
	st := Drain(ctx, c, proc, d)
	return json.NewEncoder(os.Stdout).Encode(st)
}

// SpawnDrain starts procs OS processes running name with args (each a fresh
// process) that call [ChildDrain], waits until every one is ready, starts them
// together, and returns each one's stats, in process order.
func SpawnDrain(ctx context.Context, name string, args []string, procs int, d time.Duration) ([]ProcStats, error) {
	type child struct {
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout *bufio.Reader
		stderr bytes.Buffer
	}
	cs := make([]*child, procs)
	kill := func() {
		for _, c := range cs {
			if c != nil && c.cmd.Process != nil {
				c.cmd.Process.Kill()
				c.cmd.Wait()
			}
		}
	}
	for i := range procs {
		c := &child{cmd: exec.CommandContext(ctx, name, args...)}
		c.cmd.Env = append(os.Environ(), EnvProc+"="+strconv.Itoa(i), EnvFor+"="+d.String())
		c.cmd.Stderr = &c.stderr
		var err error
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			kill()
			return nil, err
		}
		out, err := c.cmd.StdoutPipe()
		if err != nil {
			kill()
			return nil, err
		}
		c.stdout = bufio.NewReader(out)
		if err := c.cmd.Start(); err != nil {
			kill()
			return nil, fmt.Errorf("child %d: %w", i, err)
		}
		cs[i] = c
	}
	for i, c := range cs {
		if line, err := c.stdout.ReadString('\n'); err != nil || line != "ready\n" {
			kill()
			return nil, fmt.Errorf("child %d: not ready: %q, %v: %s", i, line, err, c.stderr.Bytes())
		}
	}
	for _, c := range cs {
		c.stdin.Close() // go
	}
	out := make([]ProcStats, procs)
	var errs []error
	for i, c := range cs {
		rest, rerr := io.ReadAll(c.stdout)
		if err := c.cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("child %d: %w: %s", i, err, c.stderr.Bytes()))
			continue
		}
		if rerr != nil {
			errs = append(errs, fmt.Errorf("child %d: %w", i, rerr))
			continue
		}
		if err := json.Unmarshal(rest, &out[i]); err != nil {
			errs = append(errs, fmt.Errorf("child %d: output %q: %w", i, rest, err))
		}
	}
	return out, errors.Join(errs...)
}

// DrainSummary sums up one drain.
type DrainSummary struct {
	Procs      int
	Events     int
	Rate       float64       // events/s over the longest child's elapsed time
	MinShare   float64       // smallest events share ÷ fair share (1 = exactly fair)
	MaxShare   float64       // largest events share ÷ fair share
	MaxWrite   time.Duration // longest single write call in any process
	Busy       int
	OtherErrs  int
	FirstError string
}

// SummarizeDrain sums up the stats of the processes of one drain.
func SummarizeDrain(ps []ProcStats) DrainSummary {
	s := DrainSummary{Procs: len(ps), MinShare: 1e9}
	var longest time.Duration
	for _, p := range ps {
		s.Events += p.Events
		s.Busy += p.Busy
		s.OtherErrs += p.OtherErrs
		if s.FirstError == "" {
			s.FirstError = p.FirstErr
		}
		s.MaxWrite = max(s.MaxWrite, p.MaxWrite)
		longest = max(longest, p.Elapsed)
	}
	if longest > 0 {
		s.Rate = float64(s.Events) / longest.Seconds()
	}
	for _, p := range ps {
		share := 0.0
		if s.Events > 0 {
			share = float64(p.Events) / float64(s.Events) * float64(len(ps))
		}
		s.MinShare = min(s.MinShare, share)
		s.MaxShare = max(s.MaxShare, share)
	}
	if len(ps) == 0 {
		s.MinShare = 0
	}
	return s
}

// A DrainSpec is one multi-process drain to measure: Prepare makes a fresh,
// loaded database under dir and returns the arguments that make a child
// process (the same executable) drain it.
type DrainSpec struct {
	Name    string
	Prepare func(ctx context.Context, dir string) (args []string, err error)
}

// DrainRound is one round of a drain spec: one process alone, then procs
// processes together, each on a fresh copy of the backlog.
type DrainRound struct {
	One, Many DrainSummary
}

// MeasureDrains runs every spec for rounds rounds, interleaved in a rotating
// order like [Measure]: in each round one process alone drains a fresh
// backlog for d, then procs processes drain another fresh backlog for d.
func MeasureDrains(ctx context.Context, dir, exe string, specs []DrainSpec, procs, rounds int, d time.Duration, progress func(round int, name string, r DrainRound)) (map[string][]DrainRound, error) {
	out := map[string][]DrainRound{}
	for r := range rounds {
		for j := range specs {
			sp := specs[(r+j)%len(specs)]
			var dr DrainRound
			for k, n := range []int{1, procs} {
				sub := fmt.Sprintf("%s/%s-r%d-%d", dir, sp.Name, r, k)
				if err := os.MkdirAll(sub, 0o755); err != nil {
					return nil, err
				}
				args, err := sp.Prepare(ctx, sub)
				if err != nil {
					return nil, fmt.Errorf("%s: prepare: %w", sp.Name, err)
				}
				ps, err := SpawnDrain(ctx, exe, args, n, d)
				if err != nil {
					return nil, fmt.Errorf("%s: %d processes: %w", sp.Name, n, err)
				}
				if n == 1 {
					dr.One = SummarizeDrain(ps)
				} else {
					dr.Many = SummarizeDrain(ps)
				}
				os.RemoveAll(sub)
			}
			out[sp.Name] = append(out[sp.Name], dr)
			if progress != nil {
				progress(r+1, sp.Name, dr)
			}
		}
	}
	return out, nil
}
