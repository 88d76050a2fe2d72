package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/queuestore"
)

// §7.6: under the rotation policy `flows` shows WEIGHT and POSITION (and
// --json the weight and position); `flows set-weight` changes a weight
// with an audit row and refuses bad input with a plain message. A
// min_served queue's table has no such columns (the README's outputs).
func TestFlows_7_6_RotationColumnsAndSetWeight(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	p := queuestore.DefaultPolicy()
	p.Fairness = queuestore.FairRotation
	q, err := queuestore.Open(filepath.Join(dir, "queue.db"), queuestore.WithPolicy(p))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []queuestore.Event{
		{ID: "a1", Flow: "a", Body: []byte("x")},
		{ID: "a2", Flow: "a", Body: []byte("x")},
		{ID: "b1", Flow: "b", Body: []byte("x"), Weight: 3},
	} {
		if _, err := q.Enqueue(ctx, e, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := q.Claim(ctx, 1); err != nil { // a, now in flight: b is next
		t.Fatal(err)
	}
	q.Close()

	out := mustRun(t, dir, "flows")
	want := "FLOW  SERVED  HEAD  STATE     READY  BACKLOG  BLOCKED   WEIGHT  POSITION\n" +
		"a     1       1     inflight  6      2        inflight  1       2\n" +
		"b     0       1     pending   0      1        -         3       1\n"
	if out != want {
		t.Fatalf("flows =\n%s\nwant\n%s", out, want)
	}
	var rows []flowRow
	decodeStrict(t, mustRun(t, dir, "flows", "--json"), &rows)
	if len(rows) != 2 || rows[0].Weight != 1 || rows[0].Position != 2 || rows[1].Weight != 3 || rows[1].Position != 1 {
		t.Fatalf("flows --json = %+v", rows)
	}

	for _, bad := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"flows", "set-weight", "a", "0", "--reason", "r"}, exitUsage, "want an integer 1..1000"},
		{[]string{"flows", "set-weight", "a", "x", "--reason", "r"}, exitUsage, "want an integer 1..1000"},
		{[]string{"flows", "set-weight", "a", "2"}, exitUsage, "--reason is required"},
		{[]string{"flows", "set-weight", "zz", "2", "--reason", "r"}, exitFail, `flow "zz" not found`},
	} {
		code, _, errs := runIn(t, dir, bad.args...)
		if code != bad.code || !strings.Contains(errs, bad.msg) {
			t.Errorf("relayctl %s: exit %d, stderr %q; want %d and %q", strings.Join(bad.args, " "), code, errs, bad.code, bad.msg)
		}
	}
	if out := mustRun(t, dir, "flows", "set-weight", "a", "5", "--reason", "paying tenant"); out != "flow a: weight 5 at tick 1; reason kept in the audit\n" {
		t.Fatalf("set-weight = %q", out)
	}
	if out := mustRun(t, dir, "audit"); !strings.Contains(out, `weight of flow "a" 1 -> 5`) {
		t.Fatalf("audit does not say what the weight row changed:\n%s", out)
	}
	q, err = queuestore.Open(filepath.Join(dir, "queue.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	all, err := q.AuditAll(ctx)
	if err != nil || len(all) != 1 || all[0].Kind != queuestore.AuditWeight || all[0].Reason != "paying tenant" ||
		all[0].Detail != `{"flow":"a","old":1,"new":5}` {
		t.Fatalf("audit = %+v, %v", all, err)
	}
}
