package queuestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

const (
	qRedriveRead = `SELECT flow, state, generation FROM events WHERE id = ?1`

	qRedrive = `UPDATE events SET generation = generation + 1, attempts = 0, state = 'pending',
    available_at = ?2, reason = '', lease_until = 0
WHERE id = ?1 RETURNING generation`

	qInsertAudit = `INSERT INTO audit (event_id, generation, reason, at) VALUES (?1, ?2, ?3, ?4)`
)

// Redrive puts a quarantined event back in its flow for a new round, on an
// operator's word: generation + 1, attempts 0, lifetime attempts kept,
// pending and available at now, reason cleared; ID, flow, sequence number and
// body stay as they are. In the same transaction it writes an audit row with
// the event ID, the new generation, the operator's reason and now.
//
// Checks, in this order: reason (ErrEmptyReason when empty, also ErrInvalid;
// ErrInvalid when over MaxReasonLen or not printable), the ID and
// generation (ErrInvalid), the tick (ErrTimeRegression), the event
// (ErrNotFound), the generation (ErrStaleGeneration when it is not the
// event's), the state (ErrNotQuarantined). On any error nothing changes.
// There is no identity or approval check: Redrive is a trusted entry point.
func (s *Store) Redrive(ctx context.Context, eventID string, generation int64, reason string, now clock.Tick) error {
	if err := queue.CheckReason(reason); err != nil {
		return fmt.Errorf("redrive: %w", err)
	}
	if err := queue.CheckID(eventID); err != nil {
		return fmt.Errorf("redrive: %w", err)
	}
	if err := queue.CheckGeneration(generation); err != nil {
		return fmt.Errorf("redrive: %w", err)
	}
	err := s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		now = a.now
		var (
			flow, state string
			gen         int64
		)
		err = tx.QueryRowContext(ctx, qRedriveRead, eventID).Scan(&flow, &state, &gen)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("read event: %w", err)
		}
		if gen != generation {
			return fmt.Errorf("%w: event is at generation %d, not %d", ErrStaleGeneration, gen, generation)
		}
		if state != queue.StateQuarantined {
			return fmt.Errorf("%w: event is %s", ErrNotQuarantined, state)
		}
		var newGen int64
		if err := tx.QueryRowContext(ctx, qRedrive, eventID, int64(now)).Scan(&newGen); err != nil {
			return fmt.Errorf("update event: %w", err)
		}
		// A quarantined event is its flow's head: make the flow ready now.
		if _, err := tx.ExecContext(ctx, setReadyNow(a.pol), flow, int64(now)); err != nil {
			return fmt.Errorf("update flow %q: %w", flow, err)
		}
		s.call(HookRedriveBeforeAudit)
		if _, err := tx.ExecContext(ctx, qInsertAudit, eventID, newGen, reason, int64(now)); err != nil {
			return fmt.Errorf("insert audit: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redrive %q: %w", eventID, err)
	}
	return nil
}

const qSetReadyNow = `UPDATE flows SET ready_at = ?2, ready = 1 WHERE flow = ?1`

// setReadyNow is qSetReadyNow, or under FairRotation its variant that
// clamps the returning flow's pass to vnow.
func setReadyNow(p Policy) string {
	if isRotation(p) {
		return qRotSetReadyNow
	}
	return qSetReadyNow
}
