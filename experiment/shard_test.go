package experiment

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestScenariosOneShard runs every scenario with its queue as a one-shard
// sharded queue (docs/contract.md §7.10) and compares the result with the
// scenario's golden file, written from the unsharded SQLite queue: one
// shard behaves exactly as the queue.
func TestScenariosOneShard(t *testing.T) {
	if os.Getenv("GOLDIE_UPDATE") != "" {
		t.Skip("GOLDIE_UPDATE: golden files are written from the unsharded queue only")
	}
	t.Parallel()
	for _, s := range Scenarios() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			res := runScenario(context.Background(), SQLiteShard1(), s, t.TempDir())
			for _, c := range res.Failed() {
				t.Errorf("%s: check %q failed: %s", s.Name, c.Name, c.Detail)
			}
			got, err := Marshal(res)
			if err != nil {
				t.Fatalf("Marshal(%s): %v", s.Name, err)
			}
			want, err := os.ReadFile(filepath.Join("testdata", s.Name+GoldenSuffix))
			if err != nil {
				t.Fatal(err)
			}
			if d := Diff(s.Name, want, got); d != "" {
				t.Errorf("%s as one shard differs from its golden file:\n%s", s.Name, d)
			}
		})
	}
}
