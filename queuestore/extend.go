package queuestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// Extended is queue.Extended: the outcome of an Extend that renewed the
// lease.
const Extended = queue.Extended

const (
	qExtendRead = `SELECT flow, state, generation, lease_until FROM events WHERE id = ?1`

	qExtend = `UPDATE events SET lease_until = ?2 WHERE id = ?1`

	// qExtendFlow moves the flow's ready_at with its in-flight head's lease,
	// so that a take-over happens at the new lease end and not the old one.
	qExtendFlow = `UPDATE flows SET ready_at = ?2, ready = 0 WHERE flow = ?1`
)

// Extend renews the lease of the claim of eventID with the given
// generation (docs/contract.md §7.2). It checks, in the order Settle does: a
// generation that is not the event's is Stale; an event not in flight is
// Stale; now >= lease_until is Expired (the lease already ran out; even if
// nobody took the event over, the handler must stop: its settle would be
// Expired too). Otherwise the lease becomes now + the policy's Lease and the
// outcome is Extended. It changes no attempt, served count, ticket or
// generation; Stale and Expired change nothing but the clock mark.
//
// A handler that may run longer than a lease extends it well before
// LeaseUntil (for example every Lease/3 ticks) and stops, without settling,
// once Extend answers Expired or Stale: another claim may own the event by
// then, and its settle would be refused anyway.
//
// Errors: ErrInvalid for a bad ID or a negative generation; ErrNotFound for
// an unknown event; the tick errors of every write (ErrTickOverflow,
// ErrTimeAhead, ErrTimeRegression).
func (s *Store) Extend(ctx context.Context, eventID string, generation int64, now clock.Tick) (Outcome, error) {
	it := ExtendItem{EventID: eventID, Generation: generation}
	if err := it.Validate(); err != nil {
		return "", fmt.Errorf("extend: %w", err)
	}
	var o Outcome
	err := s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		o, err = extendOne(ctx, tx, a.pol, it, a.now)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("extend %q: %w", eventID, err)
	}
	return o, nil
}

// ExtendBatch extends several claims in one transaction. Each item gets
// its own result, exactly as Extend would give it if the items were
// extended one after the other at the same now: an event named twice is
// Extended twice (to the same lease) when it was in flight with a live
// lease. A bad item (ErrInvalid, ErrNotFound) gets its own Err and does not
// fail the others.
//
// All or nothing: a tick error, a canceled context or an SQL error refuses
// the whole batch, and then nothing changes. An empty batch only checks and
// records now.
func (s *Store) ExtendBatch(ctx context.Context, items []ExtendItem, now clock.Tick) ([]SettleResult, error) {
	out := make([]SettleResult, len(items))
	err := s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		for i, it := range items {
			out[i] = SettleResult{}
			if err := it.Validate(); err != nil {
				out[i].Err = fmt.Errorf("extend %q: %w", it.EventID, err)
				continue
			}
			o, err := extendOne(ctx, tx, a.pol, it, a.now)
			if errors.Is(err, ErrNotFound) {
				out[i].Err = fmt.Errorf("extend %q: %w", it.EventID, err)
				continue
			}
			if err != nil {
				return fmt.Errorf("item %d (%q): %w", i, it.EventID, err)
			}
			out[i].Outcome = o
			if o == Extended {
				out[i].LeaseUntil = a.now + a.pol.Lease
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("extend batch: %w", err)
	}
	return out, nil
}

// extendOne does the work of one extend inside tx (after admit).
func extendOne(ctx context.Context, tx *txn, pol Policy, it ExtendItem, now clock.Tick) (Outcome, error) {
	var (
		flow, state     string
		gen, leaseUntil int64
	)
	err := tx.QueryRowContext(ctx, qExtendRead, it.EventID).Scan(&flow, &state, &gen, &leaseUntil)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%w: event %q", ErrNotFound, it.EventID)
	}
	if err != nil {
		return "", fmt.Errorf("read event: %w", err)
	}
	switch {
	case it.Generation != gen, state != queue.StateInflight:
		return Stale, nil
	case now >= clock.Tick(leaseUntil):
		return Expired, nil
	}
	lease := int64(now + pol.Lease)
	if _, err := tx.ExecContext(ctx, qExtend, it.EventID, lease); err != nil {
		return "", fmt.Errorf("extend lease: %w", err)
	}
	if _, err := tx.ExecContext(ctx, qExtendFlow, flow, lease); err != nil {
		return "", fmt.Errorf("update flow %q: %w", flow, err)
	}
	return Extended, nil
}
