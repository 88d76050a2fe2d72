package receiverstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"
)

// Receive runs on the driver (rawtx.go), where database/sql's Tx used to
// watch the context. SPEC §3: the accept is atomic, so a Receive whose
// context is already canceled must fail with an error that wraps
// context.Canceled and change nothing, whatever the message would have been
// (accept, conflict record).
func TestReceive_CanceledContextChangesNothing(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	mustReceive(t, s, msg("e1", "f", 1, 5), Accepted)
	before := snap(t, s)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, m := range []Message{
		msg("e2", "f", 2, 3),   // would be accepted
		msg("x1", "f", 1, 5),   // would be a seq_taken conflict
		msg("e1", "f", 1, 9),   // would be an id_reused conflict
		msg("g1", "new", 1, 1), // would create a flow
	} {
		if _, err := s.Receive(ctx, m); !errors.Is(err, context.Canceled) {
			t.Errorf("Receive(%s/%s/%d) with a canceled context: error = %v, want one wrapping context.Canceled", m.ID, m.Flow, m.Seq, err)
		}
		assertUnchanged(t, s, before, "Receive with a canceled context")
	}
	if _, err := s.ReceiveBatch(ctx, []Message{msg("e2", "f", 2, 3), msg("g1", "new", 1, 1)}); !errors.Is(err, context.Canceled) {
		t.Errorf("ReceiveBatch with a canceled context: error = %v, want one wrapping context.Canceled", err)
	}
	assertUnchanged(t, s, before, "ReceiveBatch with a canceled context")

	// The write connection is still usable afterwards.
	mustReceive(t, s, msg("e2", "f", 2, 3), Accepted)
}

// rawRow.Scan stands in for sql.Row.Scan on the accept path: database/sql's
// conversions for the destinations it uses, sql.ErrNoRows for no row, and an
// error (never a silent zero) for a NULL or any other conversion (stricter
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
	} {
		if err := (&rawRow{vals: []driver.Value{tc.v}}).Scan(tc.dest); err == nil {
			t.Errorf("Scan(%s) error = nil, want a conversion error", tc.name)
		}
	}
}
