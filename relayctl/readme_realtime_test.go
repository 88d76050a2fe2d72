package main

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queuestore"
)

// TestReadmeRealTimeSection runs the commands of the repository README's
// "Running in real time" section, in order, against a queue run in real time
// with the section's policy (Unix-millisecond ticks from ten minutes ago,
// lease 30 s, five attempts, backoff 1 s to a minute, jitter), where
// evt-2001 and evt-2002 were quarantined as unavailable and evt-2003 with
// gap. Each command must exit 0 and print exactly the output shown after it;
// afterwards the policy holds the new lease, the two unavailable events are
// redriven with one audit row each and evt-2003 is still quarantined. The
// commands run without --now, so they act at this machine's clock
// (docs/contract.md §7.3).
func TestReadmeRealTimeSection(t *testing.T) {
	t.Parallel()
	steps, ok := readmeSection(t, filepath.Join("..", "README.md"), "Running in real time")
	if !ok {
		t.Skip(`no README.md with a "## Running in real time" section above this module (a module zip)`)
	}
	if len(steps) < 4 {
		t.Fatalf("README section has %d command blocks, want at least 4", len(steps))
	}
	dir := t.TempDir()
	ctx := context.Background()
	policy := queuestore.DefaultPolicy()
	policy.Lease, policy.MaxAttempts = 30_000, 5
	policy.BackoffBase, policy.BackoffCap, policy.Jitter = 1_000, 60_000, true
	q, err := queuestore.Open(filepath.Join(dir, "queue.db"), queuestore.WithPolicy(policy))
	if err != nil {
		t.Fatal(err)
	}
	from := clock.Wall{}.Now() - 600_000
	for _, ev := range []struct{ id, flow, reason string }{
		{"evt-2001", "tenant-7", "unavailable"},
		{"evt-2002", "tenant-9", "unavailable"},
		{"evt-2003", "tenant-4", "gap"},
	} {
		if _, err := q.Enqueue(ctx, queuestore.Event{ID: ev.id, Flow: ev.flow, Body: []byte(`{"delta": 1}`)}, from); err != nil {
			t.Fatal(err)
		}
		if from, err = driveToQuarantine(ctx, q, ev.id, from, ev.reason, "", io.Discard); err != nil {
			t.Fatalf("quarantine %s: %v", ev.id, err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}

	for _, st := range steps {
		var outs []string
		for _, line := range st.commands {
			words := shellWords(t, line)
			if len(words) == 0 || words[0] != "relayctl" {
				t.Fatalf("README command %q does not start with relayctl", line)
			}
			e := newEnv(strings.NewReader(""), nil, nil)
			var out, errb strings.Builder
			e.stdout, e.stderr, e.dir = &out, &errb, dir
			if code := e.main(words[1:]); code != exitOK {
				t.Fatalf("README command %q: exit status = %d, want 0; stderr:\n%s", line, code, errb.String())
			}
			outs = append(outs, out.String())
		}
		if st.output == "" {
			continue
		}
		if got := strings.Join(outs, "\n"); got != st.output {
			t.Errorf("README output after %q:\ngot:\n%s\nwant (README):\n%s", st.commands, got, st.output)
		}
	}

	var p policyFullRow
	decodeStrict(t, mustRun(t, dir, "policy", "--json"), &p)
	if p.Lease != 60_000 || p.MaxAttempts != 5 || !p.Jitter {
		t.Fatalf("policy after the README = %+v, want lease 60000, 5 attempts, jitter on", p)
	}
	var audit []auditRow
	decodeStrict(t, mustRun(t, dir, "audit", "--json"), &audit)
	var redrove []string
	for _, a := range audit {
		if a.Kind == "redrive" {
			redrove = append(redrove, a.EventID)
			if a.Tick < int64(from) {
				t.Fatalf("redrive at tick %d, before the queue's last write %d: want the wall clock", a.Tick, from)
			}
		}
	}
	if strings.Join(redrove, " ") != "evt-2001 evt-2002" || len(audit) != 3 {
		t.Fatalf("audit after the README = %+v, want one policy change and redrives of evt-2001 and evt-2002", audit)
	}
	var left []quarantinedRow
	decodeStrict(t, mustRun(t, dir, "quarantined", "--json"), &left)
	if len(left) != 1 || left[0].ID != "evt-2003" {
		t.Fatalf("quarantined after the README = %+v, want evt-2003 (gap) only", left)
	}
}
