package queuestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"

	"github.com/fairrelay/fairrelay/clock"
)

// The write paths run on the driver (rawtx.go), where database/sql's Tx used
// to watch the context. SPEC §2: every operation is one transaction, so a
// write whose context is already canceled must fail with an error that wraps
// context.Canceled and change nothing, the clock mark included.
func TestWrites_CanceledContextChangesNothing(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t)
	enqueue(t, s, "a1", "a", "x", 1)
	c := mustClaim(t, s, 2)
	enqueue(t, s, "b1", "b", "y", 2)
	before := snap(t, s)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	const now clock.Tick = 3
	writes := []struct {
		name string
		run  func() error
	}{
		{"Enqueue", func() error {
			_, err := s.Enqueue(ctx, Event{ID: "a2", Flow: "a", Body: []byte("z")}, now)
			return err
		}},
		{"EnqueueBatch", func() error {
			_, err := s.EnqueueBatch(ctx, []Event{{ID: "c1", Flow: "c", Body: []byte("z")}}, now)
			return err
		}},
		{"Claim", func() error { _, _, err := s.Claim(ctx, now); return err }},
		{"ClaimBatch", func() error { _, err := s.ClaimBatch(ctx, now, 2); return err }},
		{"Settle", func() error {
			_, err := s.Settle(ctx, c.EventID, c.Generation, Result{OK: true}, now)
			return err
		}},
		{"SettleBatch", func() error {
			_, err := s.SettleBatch(ctx, []SettleItem{{EventID: c.EventID, Generation: c.Generation, Result: Result{OK: true}}}, now)
			return err
		}},
		{"Redrive", func() error { return s.Redrive(ctx, c.EventID, c.Generation, "operator", now) }},
	}
	for _, w := range writes {
		err := w.run()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a canceled context: error = %v, want one wrapping context.Canceled", w.name, err)
		}
		assertUnchanged(t, w.name+" with a canceled context", before, snap(t, s))
	}

	// The write connection is still usable afterwards.
	if o := settle(t, s, c.EventID, c.Generation, Result{OK: true}, now); o != Acked {
		t.Fatalf("Settle after the canceled writes = %q, want %q", o, Acked)
	}
}

// rawRow.Scan stands in for sql.Row.Scan on the write paths: database/sql's
// conversions for the destinations they use, sql.ErrNoRows for no row, and
// an error (never a silent zero) for a NULL or any other conversion (stricter
// than database/sql, which would also turn an integer into a string).
func TestRawRowScan_ConvertsAsDatabaseSQL(t *testing.T) {
	t.Parallel()
	var (
		i64  int64
		n    int
		str  string
		blob []byte
		ni   sql.NullInt64
		ns   sql.NullString
	)
	r := &rawRow{vals: []driver.Value{int64(7), int64(3), "flow", []byte("body"), nil, "x"}}
	if err := r.Scan(&i64, &n, &str, &blob, &ni, &ns); err != nil {
		t.Fatalf("Scan() error = %v", err)
	}
	if i64 != 7 || n != 3 || str != "flow" || string(blob) != "body" || ni.Valid || !ns.Valid || ns.String != "x" {
		t.Fatalf("Scan() got %d, %d, %q, %q, %+v, %+v; want 7, 3, \"flow\", \"body\", invalid, \"x\"", i64, n, str, blob, ni, ns)
	}

	src := []byte("shared")
	if err := (&rawRow{vals: []driver.Value{src}}).Scan(&blob); err != nil {
		t.Fatalf("Scan([]byte) error = %v", err)
	}
	src[0] = 'X'
	if string(blob) != "shared" {
		t.Fatalf("Scan([]byte) = %q after the source changed, want a copy \"shared\"", blob)
	}

	if err := (&rawRow{err: sql.ErrNoRows}).Scan(&i64); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("Scan() of no row: error = %v, want sql.ErrNoRows", err)
	}
	for _, tc := range []struct {
		name string
		v    driver.Value
		dest any
	}{
		{"NULL into int64", nil, &i64},
		{"NULL into string", nil, &str},
		{"text into int64", "7", &i64},
		{"integer into string", int64(7), &str},
		{"float into int", 1.5, &n},
	} {
		if err := (&rawRow{vals: []driver.Value{tc.v}}).Scan(tc.dest); err == nil {
			t.Errorf("Scan(%s) error = nil, want a conversion error", tc.name)
		}
	}
	if err := (&rawRow{vals: []driver.Value{int64(1), int64(2)}}).Scan(&i64); err == nil {
		t.Errorf("Scan() of 2 columns into 1 destination: error = nil, want one")
	}
}
