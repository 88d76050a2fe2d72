package receiverstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/fairrelay/fairrelay/drivertx"
	"github.com/fairrelay/fairrelay/receiver"
)

// MaxEffectBodyLen is the largest body, in bytes, that a store opened
// [WithEffect] receives. Such a store takes any bytes, 1..MaxEffectBodyLen
// of them, as a body; a store without an effect takes only {"delta": N}
// bodies of at most [MaxBodyLen] bytes.
const MaxEffectBodyLen = receiver.MaxEffectBodyLen

// ErrEffect reports that the user's [Effect] failed (or panicked): the
// receipt, the flow's total and everything the effect wrote were rolled
// back together, and the error the effect returned is wrapped too
// (errors.Is and errors.As reach it). Nothing changed; a retry may succeed.
var ErrEffect = receiver.ErrEffect

// Tx is the part of a database/sql transaction that an [Effect] gets: the
// method set of *sql.Tx minus Commit, Rollback and Stmt, so that code
// written for *sql.Tx (or for an interface such as sqlc's DBTX) runs on it
// unchanged. Every statement runs on the receipt's own connection, inside
// the receipt's own IMMEDIATE transaction: the effect's writes commit with
// the receipt or roll back with it.
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// Effect is a user's own effect of an accepted message. The store calls it
// once per [Accepted] message, after the rules of docs/contract.md §3 accept the
// message and its receipt is written, before the hook and the commit, with
// tx the receipt's transaction. It is never called for a duplicate, a
// conflict or a gap.
//
// Returning nil commits the receipt and the effect's writes together. Any
// error (or a panic) rolls both back: Receive then returns an error that
// wraps [ErrEffect] and the effect's error, and nothing has changed. An
// effect that finds the body unacceptable for good returns an error
// wrapping [ErrInvalidBody]; a server maps it like any invalid body.
//
// The effect must not commit or roll back (Tx cannot), must not write the
// store's own tables (flows, receipts, conflicts), and must not use the
// Store: it runs while the store holds the file's write turn. Its tables
// are created with [WithSchema].
type Effect func(ctx context.Context, tx Tx, m Message) error

// WithEffect makes the store a user's inbox: each accepted message runs
// effect inside the receipt's transaction, on the same database file.
//
// The message's body is then the effect's business: any bytes, 1 to
// [MaxEffectBodyLen] of them (else [ErrInvalidBody]), compared byte for byte
// by rule 1. The built-in delta sum does not apply: the receipt records a
// delta of 1, so a flow's total counts its accepted messages, and rule 5
// ([UnsupportedDelta], [WithMaxDelta]) never answers. Rules 1 to 4, the
// receipts, the conflicts and the flows' order are exactly as without an
// effect. One file should be used either with an effect or without one,
// never both, or its totals mix deltas and counts.
//
// A store with an effect runs its writes through database/sql (the effect
// needs a *sql.Tx) rather than the faster driver path; a nil effect is the
// same as no option.
func WithEffect(effect Effect) Option {
	return func(o *options) { o.effect = effect }
}

// WithSchema makes Open run ddl (one or more SQL statements) after the
// store's own schema, in one IMMEDIATE transaction, at every Open: it is how
// an [Effect] creates its tables in the receiver's file. It must therefore
// be idempotent (CREATE TABLE IF NOT EXISTS ...). An error from it makes
// Open fail and rolls ddl back; the store's own migrations, which Open
// commits before it, stay applied (a new file stays a receiver file). It
// must not touch the store's own tables.
func WithSchema(ddl string) Option {
	return func(o *options) { o.schema = ddl }
}

// effectBody is a valid built-in body that validate is given in place of an
// effect store's body, whose own check (length only) comes first: the ID,
// flow and seq then pass exactly the rules a store without an effect
// applies.
var effectBody = []byte(`{"delta":1}`)

// validateFor checks m as this store reads bodies and returns the delta to
// record: the body's delta, or 1 for a store with an effect.
func (s *Store) validateFor(m Message) (int64, error) {
	if s.effect == nil {
		return receiver.Validate(m)
	}
	if err := receiver.CheckEffectBody(m.Body); err != nil {
		return 0, err
	}
	named := m
	named.Body = effectBody
	if _, err := receiver.Validate(named); err != nil {
		return 0, err
	}
	return 1, nil
}

// writeTx is what the accept path runs its statements on: the driver
// transaction of a store without an effect (drivertx), or the database/sql
// transaction of a store with one.
type writeTx interface {
	exec(ctx context.Context, q string, args ...any) (sql.Result, error)
	queryRow(ctx context.Context, q string, args ...any) interface{ Scan(...any) error }
	// user is the transaction as an Effect sees it (nil on the driver path).
	user() Tx
}

// driverTx runs the accept path on the store's write connection.
type driverTx struct{ tx *drivertx.Tx }

func (d driverTx) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	r, err := d.tx.Exec(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (d driverTx) queryRow(ctx context.Context, q string, args ...any) interface{ Scan(...any) error } {
	return d.tx.QueryRow(ctx, q, args...)
}

func (driverTx) user() Tx { return nil }

// sqlTx runs the accept path, and the effect, in one database/sql
// transaction. Its exported methods are the effect's [Tx]; it has no Commit
// or Rollback, and being unexported it cannot be asserted to *sql.Tx.
type sqlTx struct{ tx *sql.Tx }

func (t *sqlTx) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, q, args...)
}

func (t *sqlTx) queryRow(ctx context.Context, q string, args ...any) interface{ Scan(...any) error } {
	return t.tx.QueryRowContext(ctx, q, args...)
}

func (t *sqlTx) user() Tx { return t }

// ExecContext runs a statement in the receipt's transaction.
func (t *sqlTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, query, args...)
}

// QueryContext runs a query in the receipt's transaction.
func (t *sqlTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a query for at most one row in the receipt's
// transaction.
func (t *sqlTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, query, args...)
}

// PrepareContext prepares a statement for the rest of the receipt's
// transaction.
func (t *sqlTx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return t.tx.PrepareContext(ctx, query)
}

// runEffect calls the store's effect for the accepted message m in tx. An
// error or a panic becomes an error wrapping ErrEffect, so that the caller
// rolls the transaction back (a panic must not leave a transaction open
// that holds the file's write lock).
func (s *Store) runEffect(ctx context.Context, tx writeTx, m Message) (err error) {
	if s.effect == nil {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: panic: %v", ErrEffect, p)
		}
	}()
	if err := s.effect(ctx, tx.user(), m); err != nil {
		return fmt.Errorf("%w: %w", ErrEffect, err)
	}
	return nil
}
