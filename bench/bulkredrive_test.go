package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fairrelay/fairrelay/queuestore"
)

// TestQuarantinedTemplate checks the bulk redrive's seed: n quarantined
// heads, one per flow, each after one failed attempt.
func TestQuarantinedTemplate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	const n = 1234 // more than two ClaimBatch chunks of 500
	if err := MakeQuarantinedTemplate(ctx, path, n); err != nil {
		t.Fatal(err)
	}
	q, err := queuestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	qs, err := q.Quarantined(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != n {
		t.Fatalf("%d quarantined, want %d", len(qs), n)
	}
	flows := map[string]bool{}
	for _, e := range qs {
		if e.Generation != 1 || e.LifetimeAttempts != 1 || e.Reason != "bench_failure" {
			t.Fatalf("quarantined %+v, want generation 1, one attempt, reason bench_failure", e)
		}
		flows[e.Flow] = true
	}
	if len(flows) != n {
		t.Fatalf("%d flows hold the %d quarantined events, want one each", len(flows), n)
	}
}

// TestMeasureBulkRedrive runs both sides on a small template: every round
// reports both rates, and the round's copies are gone afterwards.
func TestMeasureBulkRedrive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "q.db")
	const n = 40
	if err := MakeQuarantinedTemplate(ctx, tmpl, n); err != nil {
		t.Fatal(err)
	}
	var seen []int
	rounds, err := MeasureBulkRedrive(ctx, filepath.Join(dir, "runs"), tmpl, n, 2, func(round int, r BulkRedriveRound) {
		seen = append(seen, round)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rounds) != 2 || len(seen) != 2 {
		t.Fatalf("%d rounds, %d progress calls; want 2 and 2", len(rounds), len(seen))
	}
	for i, r := range rounds {
		if !(r.Bulk > 0) || !(r.OneByOne > 0) {
			t.Fatalf("round %d: rates %+v, want both above 0", i+1, r)
		}
	}
	left, err := os.ReadDir(filepath.Join(dir, "runs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("%d round folders left behind, want none", len(left))
	}
}

// TestMeasureBulkRedriveShortfall: a template holding fewer quarantined
// events than claimed is an error, never a faster rate.
func TestMeasureBulkRedriveShortfall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "q.db")
	if err := MakeQuarantinedTemplate(ctx, tmpl, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := MeasureBulkRedrive(ctx, filepath.Join(dir, "runs"), tmpl, 6, 1, nil); err == nil {
		t.Fatal("MeasureBulkRedrive with 5 quarantined events claimed as 6: no error")
	}
}
