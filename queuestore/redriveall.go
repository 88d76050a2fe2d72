package queuestore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fairrelay/fairrelay/clock"
)

// RedriveChunk is the number of events RedriveAll redrives per transaction.
const RedriveChunk = 500

func validateFilter(f RedriveFilter) error {
	if f.Flow != "" {
		if err := checkText("filter flow", f.Flow, MaxNameLen); err != nil {
			return err
		}
	}
	if f.Reason != "" {
		if err := checkText("filter reason", f.Reason, MaxReasonLen); err != nil {
			return err
		}
	}
	return nil
}

// quarantinedQuery is the query of the quarantined events matching f, in
// (flow, seq) order, with its arguments; limit > 0 adds a LIMIT. Each form
// is driven by an index: events_quarantined without a reason, and
// events_quarantined_reason with one (plan_test.go). It returns one JSON
// array of objects with QuarantinedEvent's keys.
func quarantinedQuery(f RedriveFilter, limit int) (string, []any) {
	q := `SELECT json_group_array(json_object('event_id', id, 'flow', flow, 'seq', seq,
    'generation', generation, 'lifetime_attempts', lifetime_attempts, 'reason', reason))
FROM (SELECT id, flow, seq, generation, lifetime_attempts, reason FROM events
    WHERE state = 'quarantined'`
	var args []any
	if f.Flow != "" {
		args = append(args, f.Flow)
		q += fmt.Sprintf(" AND flow = ?%d", len(args))
	}
	if f.Reason != "" {
		args = append(args, f.Reason)
		q += fmt.Sprintf(" AND reason = ?%d", len(args))
	}
	q += " ORDER BY flow, seq"
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	return q + ")", args
}

// QuarantinedMatching returns the quarantined events that f selects,
// ordered by flow and sequence number: what RedriveAll with f would
// redrive now (its dry run). A quarantined event is always its flow's head.
func (s *Store) QuarantinedMatching(ctx context.Context, f RedriveFilter) ([]QuarantinedEvent, error) {
	if err := validateFilter(f); err != nil {
		return nil, fmt.Errorf("quarantined matching: %w", err)
	}
	q, args := quarantinedQuery(f, 0)
	var js []byte
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(&js); err != nil {
		return nil, fmt.Errorf("quarantined matching: %w", err)
	}
	var out []QuarantinedEvent
	if err := json.Unmarshal(js, &out); err != nil {
		return nil, fmt.Errorf("quarantined matching: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// RedriveAll redrives every quarantined event that f selects, on one
// operator reason, each exactly as Redrive would (generation + 1, attempts
// 0, pending and available at now, reason cleared, its flow dispatchable at
// once), with one audit row per event (its new generation, the reason,
// now). It returns the events redriven, in (flow, seq) order per chunk.
//
// It works in chunks of RedriveChunk events, one transaction each, until no
// quarantined event matches. A crash or an error between chunks leaves the
// earlier chunks done and the rest quarantined: running it again redrives
// the rest and never an event twice (a redriven event is no longer
// quarantined). On an error RedriveAll returns the events of the chunks
// already committed with the error.
//
// Checks, before anything is written: the reason (as Redrive's), the
// filter (ErrInvalid), then per chunk the tick errors of every write.
// Nothing matching is not an error: the result is empty (and now is
// recorded as the clock mark).
func (s *Store) RedriveAll(ctx context.Context, f RedriveFilter, reason string, now clock.Tick) ([]Redriven, error) {
	if err := checkReason(reason); err != nil {
		return nil, fmt.Errorf("redrive all: %w", err)
	}
	if err := validateFilter(f); err != nil {
		return nil, fmt.Errorf("redrive all: %w", err)
	}
	q, args := quarantinedQuery(f, RedriveChunk)
	var done []Redriven
	for {
		var chunk []Redriven
		err := s.withTx(ctx, func(tx *txn) error {
			chunk = chunk[:0]
			a, err := s.admit(ctx, tx, now)
			if err != nil {
				return err
			}
			at := a.now
			var js []byte
			if err := tx.QueryRowContext(ctx, q, args...).Scan(&js); err != nil {
				return fmt.Errorf("read quarantined events: %w", err)
			}
			var evs []QuarantinedEvent
			if err := json.Unmarshal(js, &evs); err != nil {
				return fmt.Errorf("read quarantined events: %w", err)
			}
			for _, e := range evs {
				var newGen int64
				if err := tx.QueryRowContext(ctx, qRedrive, e.EventID, int64(at)).Scan(&newGen); err != nil {
					return fmt.Errorf("update event %q: %w", e.EventID, err)
				}
				if _, err := tx.ExecContext(ctx, setReadyNow(a.pol), e.Flow, int64(at)); err != nil {
					return fmt.Errorf("update flow %q: %w", e.Flow, err)
				}
				s.call(HookRedriveBeforeAudit)
				if _, err := tx.ExecContext(ctx, qInsertAudit, e.EventID, newGen, reason, int64(at)); err != nil {
					return fmt.Errorf("insert audit: %w", err)
				}
				chunk = append(chunk, Redriven{EventID: e.EventID, Flow: e.Flow, Seq: e.Seq, Generation: newGen})
			}
			return nil
		})
		if err != nil {
			return done, fmt.Errorf("redrive all: %w", err)
		}
		done = append(done, chunk...)
		if len(chunk) < RedriveChunk {
			return done, nil
		}
	}
}
