package conformance

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairrelay/fairrelay/pgqueuestore"
	"github.com/fairrelay/fairrelay/pgtest"
	"github.com/fairrelay/fairrelay/queuestore"
)

// The experiment's golden files are JSON snapshots. Random sequences of
// every operation, applied to a SQLite store and to a PostgreSQL store
// (the PostgreSQL twin takes each ClaimBatch as successive Claims), leave
// snapshots that encode to the same JSON bytes after every step, and both
// agree with the reference model.
func TestTwin_SQLiteAndPostgresSnapshotsEncodeTheSame(t *testing.T) {
	pgtest.Require(t)
	ctx := context.Background()
	seeds := uint64(60)
	if raceDetector {
		seeds = 15
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		lite, err := queuestore.Open(filepath.Join(t.TempDir(), "queue.db"))
		if err != nil {
			t.Fatal(err)
		}
		_, schema := pgtest.Schema(t)
		pg, err := pgqueuestore.OpenPool(ctx, pgtest.Pool(t), pgqueuestore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		r := &runner{s: sqliteQueue{lite}, twin: pg, m: newModel(), c: randChooser{rand.New(rand.NewPCG(seed, 7))}}
		for i := 0; i < 25; i++ {
			if err := r.step(ctx); err != nil {
				t.Fatalf("seed %d step %d: %v\nsteps:\n  %s", seed, i, err, strings.Join(r.log, "\n  "))
			}
			a, err := r.s.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			b, err := r.twin.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			if string(ja) != string(jb) {
				t.Fatalf("seed %d step %d: JSON differs\nsqlite   %s\npostgres %s\nsteps:\n  %s", seed, i, ja, jb,
					strings.Join(r.log, "\n  "))
			}
		}
		lite.Close()
		pg.Close()
	}
}
