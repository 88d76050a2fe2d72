package bench

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestHelperDrainChild is the child of the drain tests: args after "--" are
// the database path and the turn.
func TestHelperDrainChild(t *testing.T) {
	if os.Getenv(EnvProc) == "" {
		t.Skip("helper process")
	}
	args := flag.Args()
	proc, _ := strconv.Atoi(os.Getenv(EnvProc))
	if err := RawChild(context.Background(), args[0], Turn(args[1]), proc); err != nil {
		os.Stderr.WriteString(err.Error())
		os.Exit(2)
	}
	os.Exit(0)
}

// The counts the processes report are what the database shows: every event a
// process counts is settled, by that process, and none twice.
func TestDrainCountsMatchTheDatabase(t *testing.T) {
	t.Parallel()
	for _, turn := range []Turn{TurnBusyTimeout, TurnWriterQueue, TurnWriterKeep} {
		t.Run(string(turn), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "raw.db")
			db, err := OpenDB(path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			// small enough to be drained: the processes stop on an empty backlog, and
			// the 2-minute window is only a bound for a race-built run on a busy
			// machine (20 s was too short there: 325 of 400 done under -race).
			const backlog = 400
			if err := LoadRaw(ctx, db, backlog); err != nil {
				t.Fatal(err)
			}
			ps, err := SpawnDrain(ctx, os.Args[0], []string{"-test.run=^TestHelperDrainChild$", "--", path, string(turn)}, 3, 2*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			s := SummarizeDrain(ps)
			if s.OtherErrs != 0 {
				t.Fatalf("errors in the children: %d, first: %s", s.OtherErrs, s.FirstError)
			}
			if s.Events != backlog {
				t.Errorf("events counted = %d, want the whole backlog %d", s.Events, backlog)
			}
			for _, p := range ps {
				var settled int
				if err := db.QueryRow(`SELECT count(*) FROM ev WHERE state = 2 AND owner = ?`, p.Proc).Scan(&settled); err != nil {
					t.Fatal(err)
				}
				if settled != p.Events {
					t.Errorf("proc %d: counted %d events, database has %d settled by it", p.Proc, p.Events, settled)
				}
				if !p.Empty {
					t.Errorf("proc %d: did not see the backlog empty", p.Proc)
				}
			}
		})
	}
}

type countingWorkload struct{ steps int }

func (w *countingWorkload) Step(context.Context) (int, error) { w.steps++; return 2, nil }
func (w *countingWorkload) Close() error                      { return nil }

func TestMeasureGivesEveryCaseEveryRound(t *testing.T) {
	t.Parallel()
	var ws []*countingWorkload
	mk := func(name string) Case {
		return Case{Name: name, Setup: func(context.Context, string) (Workload, error) {
			w := &countingWorkload{}
			ws = append(ws, w)
			return w, nil
		}}
	}
	var order []string
	rates, err := Measure(context.Background(), t.TempDir(), []Case{mk("a"), mk("b"), mk("c")},
		Plan{Rounds: 3, Slice: time.Millisecond}, func(_ int, name string, _ float64) { order = append(order, name) })
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		if len(rates[name]) != 3 {
			t.Errorf("rates[%q] has %d rounds, want 3", name, len(rates[name]))
		}
		for _, r := range rates[name] {
			if r <= 0 {
				t.Errorf("rates[%q] has %v, want > 0", name, r)
			}
		}
	}
	want := []string{"a", "b", "c", "b", "c", "a", "c", "a", "b"}
	for i := range want {
		if i >= len(order) || order[i] != want[i] {
			t.Fatalf("order = %v, want %v (rotated by one each round)", order, want)
		}
	}
}
