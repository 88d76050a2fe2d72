package receiverstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// orderSchema is a user's table for the effect tests: one row per order.
const orderSchema = `CREATE TABLE IF NOT EXISTS orders (
	id   TEXT NOT NULL PRIMARY KEY,
	flow TEXT NOT NULL,
	body BLOB NOT NULL
) STRICT`

// recordOrder is an effect that inserts the message as an order row.
func recordOrder(ctx context.Context, tx Tx, m Message) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO orders (id, flow, body) VALUES (?, ?, ?)`, m.ID, m.Flow, m.Body)
	return err
}

func orderCount(t testing.TB, s *Store) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM orders`).Scan(&n); err != nil {
		t.Fatalf("count orders: %v", err)
	}
	return n
}

func opaque(id, flow string, seq int64, body string) Message {
	return Message{ID: id, Flow: flow, Seq: seq, Body: []byte(body)}
}

// A succeeding effect commits with its receipt: both are there afterwards,
// and while the effect runs it sees its own receipt (same transaction) but
// another Store does not (not yet committed).
func TestEffect_SucceedingEffectCommitsWithTheReceipt(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "r.db")
	observer := reopen(t, path, WithSchema(orderSchema))
	var inside []string
	s := reopen(t, path, WithSchema(orderSchema), WithEffect(func(ctx context.Context, tx Tx, m Message) error {
		var mine int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM receipts WHERE id = ?`, m.ID).Scan(&mine); err != nil {
			return err
		}
		var seen int
		if err := observer.db.QueryRowContext(ctx, `SELECT count(*) FROM receipts WHERE id = ?`, m.ID).Scan(&seen); err != nil {
			return err
		}
		inside = append(inside, fmt.Sprintf("%s:%d%d", m.ID, mine, seen))
		return recordOrder(ctx, tx, m)
	}))
	mustReceive(t, s, opaque("o1", "shop", 1, `{"sku":"a","qty":2}`), Accepted)
	mustReceive(t, s, opaque("o2", "shop", 2, `not even json`), Accepted)

	if got, want := strings.Join(inside, " "), "o1:10 o2:10"; got != want {
		t.Errorf("receipt visible (own tx, other store) inside the effect = %q, want %q", got, want)
	}
	if n := orderCount(t, observer); n != 2 {
		t.Errorf("orders = %d, want 2", n)
	}
	sn := snap(t, observer)
	if len(sn.Receipts) != 2 || sn.Receipts[1].Body != "not even json" || sn.Receipts[1].Delta != 1 {
		t.Errorf("receipts = %s, want two, the second with its body as sent and delta 1", js(sn.Receipts))
	}
	if got := total(t, observer, "shop"); got != 2 {
		t.Errorf("Total(shop) = %d, want 2 (with an effect the total counts accepted messages)", got)
	}
}

// A failing effect rolls back its own writes, the receipt and the total:
// nothing changes, the error wraps ErrEffect and the effect's own error, and
// a later delivery of the same message is accepted.
func TestEffect_FailingEffectLeavesNeitherReceiptNorEffectRow(t *testing.T) {
	t.Parallel()
	boom := errors.New("payment service down")
	fail := false
	s, _ := open(t, WithSchema(orderSchema), WithEffect(func(ctx context.Context, tx Tx, m Message) error {
		if err := recordOrder(ctx, tx, m); err != nil {
			return err
		}
		if fail {
			return boom
		}
		return nil
	}))
	mustReceive(t, s, opaque("o1", "shop", 1, `{"n":1}`), Accepted)
	before := snap(t, s)

	fail = true
	m := opaque("o2", "shop", 2, `{"n":2}`)
	out, err := s.Receive(context.Background(), m)
	if !errors.Is(err, ErrEffect) || !errors.Is(err, boom) {
		t.Fatalf("Receive() = %q, %v; want an error wrapping ErrEffect and the effect's error", out, err)
	}
	if errors.Is(err, ErrInvalidBody) || errors.Is(err, ErrInvalid) {
		t.Errorf("Receive() error %v matches a bad-input sentinel", err)
	}
	assertUnchanged(t, s, before, "a failing effect")
	if n := orderCount(t, s); n != 1 {
		t.Fatalf("orders after a failing effect = %d, want 1 (the first)", n)
	}

	fail = false
	mustReceive(t, s, m, Accepted)
	if n := orderCount(t, s); n != 2 {
		t.Errorf("orders after the retry = %d, want 2", n)
	}
}

// A panicking effect is an ErrEffect like a failing one, and leaves no
// transaction open behind it: the next message is received.
func TestEffect_PanicRollsBackAndReleasesTheFile(t *testing.T) {
	t.Parallel()
	s, path := open(t, WithSchema(orderSchema), WithEffect(func(ctx context.Context, tx Tx, m Message) error {
		if err := recordOrder(ctx, tx, m); err != nil {
			return err
		}
		if m.Seq == 1 {
			panic("effect bug")
		}
		return nil
	}))
	before := snap(t, s)
	_, err := s.Receive(context.Background(), opaque("o1", "shop", 1, `x`))
	if !errors.Is(err, ErrEffect) || !strings.Contains(err.Error(), "effect bug") {
		t.Fatalf("Receive() error = %v, want ErrEffect naming the panic", err)
	}
	assertUnchanged(t, s, before, "a panicking effect")
	// Another store (the built-in path) can write to the file: no lock is held.
	other := reopen(t, path)
	mustReceive(t, other, msg("d1", "deltas", 1, 3), Accepted)
	if n := orderCount(t, s); n != 0 {
		t.Errorf("orders = %d, want 0", n)
	}
}

// The effect runs for accepted messages only, once each, in order.
func TestEffect_RunsForAcceptedOnly(t *testing.T) {
	t.Parallel()
	var calls []string
	s, _ := open(t, WithEffect(func(ctx context.Context, tx Tx, m Message) error {
		calls = append(calls, m.ID)
		return nil
	}))
	mustReceive(t, s, opaque("a", "f", 1, `one`), Accepted)
	mustReceive(t, s, opaque("a", "f", 1, `one`), Duplicate)
	mustReceive(t, s, opaque("a", "f", 1, `ONE`), Conflict)
	mustReceive(t, s, opaque("b", "f", 1, `one`), Conflict)
	mustReceive(t, s, opaque("c", "f", 3, `three`), Gap)
	mustReceive(t, s, opaque("b", "f", 2, `two`), Accepted)
	if got, want := strings.Join(calls, ","), "a,b"; got != want {
		t.Errorf("effect calls = %s, want %s", got, want)
	}
}

// With an effect the body is the effect's business: any 1..MaxEffectBodyLen
// bytes; rule 5 never answers; the ID, flow and seq rules are unchanged; an
// effect may refuse a body for good by wrapping ErrInvalidBody.
func TestEffect_BodyGrammarAndValidation(t *testing.T) {
	t.Parallel()
	s, _ := open(t, WithMaxDelta(1), WithEffect(func(ctx context.Context, tx Tx, m Message) error {
		if bytes.HasPrefix(m.Body, []byte("refuse")) {
			return ErrInvalidBody
		}
		return nil
	}))
	ctx := context.Background()
	mustReceive(t, s, opaque("a", "f", 1, `{"delta": 500}`), Accepted) // no rule 5 with an effect
	mustReceive(t, s, Message{ID: "b", Flow: "f", Seq: 2, Body: []byte{0, 0xff, '\n'}}, Accepted)
	mustReceive(t, s, Message{ID: "c", Flow: "f", Seq: 3, Body: bytes.Repeat([]byte("x"), MaxEffectBodyLen)}, Accepted)
	before := snap(t, s)

	for _, c := range []struct {
		name string
		m    Message
		want error
	}{
		{"empty body", Message{ID: "d", Flow: "f", Seq: 4}, ErrInvalidBody},
		{"body too long", Message{ID: "d", Flow: "f", Seq: 4, Body: bytes.Repeat([]byte("x"), MaxEffectBodyLen+1)}, ErrInvalidBody},
		{"empty ID", opaque("", "f", 4, "x"), ErrInvalid},
		{"unprintable flow", opaque("d", "f\x00", 4, "x"), ErrInvalid},
		{"seq 0", opaque("d", "f", 0, "x"), ErrInvalid},
		{"refused by the effect", opaque("d", "f", 4, "refuse me"), ErrInvalidBody},
	} {
		_, err := s.Receive(ctx, c.m)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: Receive() error = %v, want %v", c.name, err, c.want)
		}
	}
	assertUnchanged(t, s, before, "refused messages")
	if got := total(t, s, "f"); got != 3 {
		t.Errorf("Total(f) = %d, want 3", got)
	}
}

// ReceiveBatch runs the effect once per accepted message inside the batch's
// one transaction; one failing effect undoes the whole batch.
func TestEffect_ReceiveBatch(t *testing.T) {
	t.Parallel()
	failOn := ""
	s, _ := open(t, WithSchema(orderSchema), WithEffect(func(ctx context.Context, tx Tx, m Message) error {
		if m.ID == failOn {
			return errors.New("no")
		}
		return recordOrder(ctx, tx, m)
	}))
	ctx := context.Background()
	batch := []Message{
		opaque("a", "f", 1, "1"), opaque("a", "f", 1, "1"), opaque("b", "g", 1, "1"),
		opaque("c", "f", 2, "2"), opaque("e", "f", 9, "9"),
	}
	failOn = "c"
	before := snap(t, s)
	res, err := s.ReceiveBatch(ctx, batch)
	if !errors.Is(err, ErrEffect) || res != nil {
		t.Fatalf("ReceiveBatch() = %v, %v; want nil, ErrEffect", res, err)
	}
	assertUnchanged(t, s, before, "a batch with a failing effect")
	if n := orderCount(t, s); n != 0 {
		t.Fatalf("orders = %d, want 0", n)
	}

	failOn = ""
	res, err = s.ReceiveBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res {
		got = append(got, string(r.Outcome))
	}
	if want := "accepted duplicate accepted accepted gap"; strings.Join(got, " ") != want {
		t.Errorf("outcomes = %v, want %s", got, want)
	}
	if n := orderCount(t, s); n != 3 {
		t.Errorf("orders = %d, want 3", n)
	}
	if got := total(t, s, "f"); got != 2 {
		t.Errorf("Total(f) = %d, want 2", got)
	}
}

// WithSchema runs at every Open, after the store's schema; a failing one
// makes Open fail.
func TestEffect_WithSchema(t *testing.T) {
	t.Parallel()
	s, path := open(t, WithSchema(orderSchema))
	if n := orderCount(t, s); n != 0 {
		t.Fatalf("orders = %d, want 0", n)
	}
	reopen(t, path, WithSchema(orderSchema)) // idempotent: runs again without error
	if _, err := Open(path, WithSchema(`CREATE TABLE orders (x INTEGER)`)); err == nil || !strings.Contains(err.Error(), "WithSchema") {
		t.Fatalf("Open with a failing schema: error = %v, want the WithSchema error", err)
	}
	if _, err := Open(path, WithSchema(`CREATE TABLE t2 (x INTEGER); SELECT nonsense FROM nowhere`)); err == nil {
		t.Fatal("Open with a half-failing schema: error = nil")
	}
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 't2'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("table t2 after the failed schema: count = %d, %v; want 0 (rolled back)", n, err)
	}
}

// Code written for *sql.Tx runs on the effect's Tx: prepared statements and
// multi-row queries work inside the receipt's transaction.
func TestEffect_TxQueryAndPrepare(t *testing.T) {
	t.Parallel()
	var lines []string
	s, _ := open(t, WithSchema(orderSchema), WithEffect(func(ctx context.Context, tx Tx, m Message) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO orders (id, flow, body) VALUES (?, ?, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		if _, err := st.ExecContext(ctx, m.ID, m.Flow, m.Body); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT id FROM orders ORDER BY id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		lines = append(lines, strings.Join(ids, ","))
		return rows.Err()
	}))
	mustReceive(t, s, opaque("a", "f", 1, "x"), Accepted)
	mustReceive(t, s, opaque("b", "f", 2, "y"), Accepted)
	if got, want := strings.Join(lines, " "), "a a,b"; got != want {
		t.Errorf("rows seen inside the effect = %q, want %q", got, want)
	}
	if _, ok := any(&sqlTx{}).(interface{ Commit() error }); ok {
		t.Error("the effect's Tx has a Commit method")
	}
}

const effectCrashEnv = "RECEIVERSTORE_TEST_EFFECT_CRASH_DB"

// TestHelperEffectProcess is not a test: run as a child with effectCrashEnv
// set, it receives one message whose effect writes an order row, with a
// hook that exits with status 73 before commit.
func TestHelperEffectProcess(t *testing.T) {
	path := os.Getenv(effectCrashEnv)
	if path == "" {
		t.Skip("helper process for TestEffect_CrashBeforeCommitLeavesNeither")
	}
	s, err := Open(path, WithSchema(orderSchema), WithEffect(recordOrder), WithHook(func(HookPoint) { os.Exit(73) }))
	if err != nil {
		os.Exit(2)
	}
	_, _ = s.Receive(context.Background(), opaque("o2", "shop", 2, "second"))
	os.Exit(3) // the hook did not fire
}

// A real process that dies at HookAcceptBeforeCommit, after its effect ran,
// leaves neither the receipt nor the effect's row behind.
func TestEffect_CrashBeforeCommitLeavesNeither(t *testing.T) {
	t.Parallel()
	s, path := open(t, WithSchema(orderSchema), WithEffect(recordOrder))
	mustReceive(t, s, opaque("o1", "shop", 1, "first"), Accepted)
	before := snap(t, s)

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperEffectProcess$")
	cmd.Env = append(os.Environ(), effectCrashEnv+"="+path)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 73 {
		t.Fatalf("child exit = %v, want status 73; output:\n%s", err, out)
	}

	s2 := reopen(t, path, WithSchema(orderSchema), WithEffect(recordOrder))
	assertUnchanged(t, s2, before, "a crash before commit")
	if n := orderCount(t, s2); n != 1 {
		t.Fatalf("orders after the crash = %d, want 1", n)
	}
	var check string
	if err := s2.db.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check = %q, %v; want ok", check, err)
	}
	mustReceive(t, s2, opaque("o2", "shop", 2, "second"), Accepted)
	if n := orderCount(t, s2); n != 2 {
		t.Errorf("orders after the redelivery = %d, want 2", n)
	}
}

// A canceled context stops the effect's statements and rolls everything
// back.
func TestEffect_CanceledContextChangesNothing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	s, _ := open(t, WithSchema(orderSchema), WithEffect(func(ctx context.Context, tx Tx, m Message) error {
		cancel()
		return recordOrder(ctx, tx, m)
	}))
	before := snap(t, s)
	_, err := s.Receive(ctx, opaque("o1", "shop", 1, "x"))
	if err == nil {
		t.Fatal("Receive() with a context canceled inside the effect: error = nil")
	}
	assertUnchanged(t, s, before, "a canceled effect")
	if n := orderCount(t, s); n != 0 {
		t.Errorf("orders = %d, want 0", n)
	}
}
