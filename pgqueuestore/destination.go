package pgqueuestore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

// The store is a queue.DestinationStore (docs/contract.md §7.11).
var _ queue.DestinationStore = (*Store)(nil)

const (
	// qDestRead reads one destination's settings and bucket, locked.
	qDestRead = `SELECT url, secrets, concurrency, rate, paused, tokens, refilled_at
FROM {s}.destinations WHERE name = $1 FOR UPDATE`

	// qDestInsert registers a destination with a full bucket.
	qDestInsert = `INSERT INTO {s}.destinations (name, url, secrets, concurrency, rate, paused, tokens, refilled_at)
VALUES ($1, $2, $3, $4, $5::integer, NULL, $5::bigint * 1000, $6)`

	// qDestUpdate changes a destination's settings (not its pause) and
	// sets its bucket ($6 milli-tokens at $7).
	qDestUpdate = `UPDATE {s}.destinations SET url = $2, secrets = $3, concurrency = $4, rate = $5, tokens = $6, refilled_at = $7
WHERE name = $1`

	qDestPause = `UPDATE {s}.destinations SET paused = $2 WHERE name = $1`

	// qDestinations reads every destination with its state: Flows and
	// Backlog over its flows (flows_dest), Inflight its unexpired leases
	// at the clock mark (events_inflight_dest).
	qDestinations = `SELECT x.name, x.url, x.secrets, x.concurrency, x.rate, coalesce(x.paused, ''), c.flows, c.backlog,
    (SELECT count(*) FROM {s}.events AS i
        WHERE i.inflight_dest = x.name AND i.inflight_lease > (SELECT clock_mark FROM {s}.meta WHERE id = 1))
FROM {s}.destinations AS x
CROSS JOIN LATERAL (SELECT count(*) AS flows,
        coalesce(sum(CASE WHEN f.head_seq IS NULL THEN 0 ELSE f.last_seq - f.head_seq + 1 END), 0)::bigint AS backlog
    FROM {s}.flows AS f WHERE f.dest = x.name AND f.dest <> '') AS c
ORDER BY x.name`

	// qDestExists reads which names of the array $1 are registered.
	qDestExists = `SELECT name FROM {s}.destinations WHERE name = ANY($1::text[])`

	// qFlowDest reads a flow's destination.
	qFlowDest = `SELECT dest FROM {s}.flows WHERE flow = $1`

	// qSetFlowDest changes a flow's destination in flows and in its
	// sequence counter (which the enqueues check).
	qSetFlowDest = `UPDATE {s}.flows SET dest = $2 WHERE flow = $1`
	qSetSeqDest  = `UPDATE {s}.flow_seqs SET dest = $2 WHERE flow = $1`
	qLockSeq     = `SELECT 1 FROM {s}.flow_seqs WHERE flow = $1 FOR UPDATE`
	// qRegisteredDests is every destination's settings, the table alone.
	qRegisteredDests = `SELECT name, url, secrets, concurrency, rate FROM {s}.destinations ORDER BY name`
	qSnapDests       = `SELECT name, url, cardinality(secrets), concurrency, rate, coalesce(paused, '') FROM {s}.destinations ORDER BY name`
	qCountDests      = `SELECT count(*) FROM {s}.destinations`
	destTokenScale   = 1000 // milli-tokens per token: a claim's cost
	destRefillLimit  = 1000 // ticks after which a bucket is full again
)

// destRow is a destination as qDestRead reads it.
type destRow struct {
	url                string
	secrets            []string
	concurrency, rate  int
	paused             *string
	tokens, refilledAt int64
	found              bool
}

func (r destRow) snapshot(name string) queue.SnapshotDestination {
	d := queue.SnapshotDestination{Name: name, URL: r.url, Secrets: len(r.secrets), Concurrency: r.concurrency, Rate: r.rate}
	if r.paused != nil {
		d.Paused = *r.paused
	}
	return d
}

func (s *Store) readDest(ctx context.Context, tx pgx.Tx, name string) (destRow, error) {
	var r destRow
	err := tx.QueryRow(ctx, s.q(qDestRead), name).Scan(&r.url, &r.secrets, &r.concurrency, &r.rate, &r.paused, &r.tokens, &r.refilledAt)
	if isNoRows(err) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("read destination: %w", err)
	}
	r.found = true
	return r, nil
}

// destAudit writes an audit row of kind with a DestinationChange.
func (s *Store) destAudit(ctx context.Context, tx pgx.Tx, kind queue.AuditKind, ch any, reason string, now clock.Tick) error {
	detail, err := json.Marshal(ch)
	if err != nil {
		return fmt.Errorf("encode audit detail: %w", err)
	}
	if _, err := tx.Exec(ctx, s.q(qInsertAuditKind), string(kind), reason, string(detail), int64(now)); err != nil {
		return fmt.Errorf("insert audit: %w", err)
	}
	return nil
}

// refill is the bucket of a destination of rate rate holding tokens
// milli-tokens at tick at, refilled to now: (now - at) * rate more,
// capped at rate * 1000 (full after 1000 ticks).
func refill(tokens, at int64, rate int, now clock.Tick) int64 {
	d := min(max(int64(now)-at, 0), destRefillLimit)
	return min(int64(rate)*destTokenScale, tokens+d*int64(rate))
}

// PutDestination registers d (its bucket full) or changes the registered
// destination of that name: URL, secrets and limits; a pause is kept, and
// the bucket keeps its tokens (refilled to now under the old rate, capped
// at the new one), or is full when the old rate had no limit. It writes
// an AuditDestination row (queue.DestinationChange, secrets as a count).
// Bad input is queue.ErrInvalid (Destination.Validate), an empty reason
// queue.ErrEmptyReason; nothing changes then.
func (s *Store) PutDestination(ctx context.Context, d queue.Destination, reason string, now clock.Tick) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("put destination: %w", err)
	}
	if err := queue.CheckReason(reason); err != nil {
		return fmt.Errorf("put destination: %w", err)
	}
	err := s.withTx(ctx, func(tx pgx.Tx, a admission) error {
		now, _, err := s.admit(ctx, tx, a, now)
		if err != nil {
			return err
		}
		old, err := s.readDest(ctx, tx, d.Name)
		if err != nil {
			return err
		}
		ch := queue.DestinationChange{Name: d.Name}
		if old.found {
			o := old.snapshot(d.Name)
			ch.Old = &o
			tokens := int64(d.Rate) * destTokenScale
			if old.rate > 0 {
				tokens = min(tokens, refill(old.tokens, old.refilledAt, old.rate, now))
			}
			if _, err := tx.Exec(ctx, s.q(qDestUpdate), d.Name, d.URL, d.Secrets, d.Concurrency, d.Rate, tokens, int64(now)); err != nil {
				return fmt.Errorf("update destination: %w", err)
			}
		} else if _, err := tx.Exec(ctx, s.q(qDestInsert), d.Name, d.URL, d.Secrets, d.Concurrency, d.Rate, int64(now)); err != nil {
			return fmt.Errorf("insert destination: %w", err)
		}
		neu := destRow{url: d.URL, secrets: d.Secrets, concurrency: d.Concurrency, rate: d.Rate, paused: old.paused}
		ch.New = neu.snapshot(d.Name)
		return s.destAudit(ctx, tx, queue.AuditDestination, ch, reason, now)
	})
	if err != nil {
		return fmt.Errorf("put destination %q: %w", d.Name, err)
	}
	s.dests.Store(true)
	return nil
}

// Destinations lists every registered destination by name, with its
// secrets and its state: Flows and Backlog read its flows (flows_dest),
// Inflight counts its unexpired leases at the clock mark. An operator's
// read, in one read transaction (the relay reads RegisteredDestinations).
func (s *Store) Destinations(ctx context.Context) ([]queue.DestinationState, error) {
	if err := s.promoteWaiting(ctx); err != nil {
		return nil, fmt.Errorf("destinations: %w", err)
	}
	var out []queue.DestinationState
	err := s.withReadTx(ctx, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, s.q(qDestinations))
		var d queue.DestinationState
		_, err := pgx.ForEachRow(rows, []any{&d.Name, &d.URL, &d.Secrets, &d.Concurrency, &d.Rate, &d.PauseReason, &d.Flows, &d.Backlog, &d.Inflight}, func() error {
			c := d
			c.Secrets = append([]string(nil), d.Secrets...)
			c.SecretCount = len(c.Secrets)
			c.Paused = c.PauseReason != ""
			out = append(out, c)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("destinations: %w", err)
	}
	return out, nil
}

// RegisteredDestinations lists every registered destination by name, with
// its settings and secrets: one statement over the destinations table
// alone, whatever the number of flows or events (docs/contract.md §7.11).
// The relay reads it to route and to know its destinations' breakers.
func (s *Store) RegisteredDestinations(ctx context.Context) ([]queue.Destination, error) {
	rows, _ := s.pool.Query(ctx, s.q(qRegisteredDests))
	var out []queue.Destination
	var d queue.Destination
	_, err := pgx.ForEachRow(rows, []any{&d.Name, &d.URL, &d.Secrets, &d.Concurrency, &d.Rate}, func() error {
		c := d
		c.Secrets = append([]string(nil), d.Secrets...)
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("registered destinations: %w", err)
	}
	return out, nil
}

// PauseDestination stops claims of the destination's flows until
// ResumeDestination (their flows keep their place: docs/contract.md
// §7.11); claims in flight settle as usual and enqueues go on. It writes
// an AuditDestinationPause row. An unregistered name is
// queue.ErrUnknownDestination, a paused one queue.ErrDestinationPaused.
func (s *Store) PauseDestination(ctx context.Context, name, reason string, now clock.Tick) error {
	if err := s.pauseDest(ctx, name, reason, now, true); err != nil {
		return fmt.Errorf("pause destination %q: %w", name, err)
	}
	return nil
}

// ResumeDestination undoes PauseDestination, with an
// AuditDestinationResume row; a destination not paused is
// queue.ErrDestinationNotPaused.
func (s *Store) ResumeDestination(ctx context.Context, name, reason string, now clock.Tick) error {
	if err := s.pauseDest(ctx, name, reason, now, false); err != nil {
		return fmt.Errorf("resume destination %q: %w", name, err)
	}
	return nil
}

func (s *Store) pauseDest(ctx context.Context, name, reason string, now clock.Tick, pause bool) error {
	if err := queue.CheckDestinationName(name); err != nil {
		return err
	}
	if err := queue.CheckReason(reason); err != nil {
		return err
	}
	return s.withTx(ctx, func(tx pgx.Tx, a admission) error {
		now, _, err := s.admit(ctx, tx, a, now)
		if err != nil {
			return err
		}
		old, err := s.readDest(ctx, tx, name)
		if err != nil {
			return err
		}
		switch {
		case !old.found:
			return queue.ErrUnknownDestination
		case pause && old.paused != nil:
			return fmt.Errorf("%w: since %q", queue.ErrDestinationPaused, *old.paused)
		case !pause && old.paused == nil:
			return queue.ErrDestinationNotPaused
		}
		o := old.snapshot(name)
		neu := old
		kind := queue.AuditDestinationResume
		var arg *string
		if pause {
			kind, arg = queue.AuditDestinationPause, &reason
		}
		neu.paused = arg
		if _, err := tx.Exec(ctx, s.q(qDestPause), name, arg); err != nil {
			return fmt.Errorf("pause: %w", err)
		}
		return s.destAudit(ctx, tx, kind, queue.DestinationChange{Name: name, Old: &o, New: neu.snapshot(name)}, reason, now)
	})
}

// SetFlowDestination makes flow deliver to dest (queue.DefaultDestination
// or a registered one) from its next claim on, with an
// AuditFlowDestination row (queue.FlowDestinationChange), also when dest
// is the flow's destination already. A claim in flight keeps counting
// against the destination it was claimed for until it settles or its
// lease ends. It locks the flow's sequence counter first, as an enqueue
// does, so it waits for a caller's open transaction that enqueued into
// the flow. Checks, in this order: the flow name, dest, the reason
// (queue.ErrInvalid, queue.ErrEmptyReason), the tick, the flow
// (queue.ErrNotFound), dest registered (queue.ErrUnknownDestination).
func (s *Store) SetFlowDestination(ctx context.Context, flow, dest, reason string, now clock.Tick) error {
	if err := queue.CheckFlow(flow); err != nil {
		return fmt.Errorf("set flow destination: %w", err)
	}
	if err := queue.CheckEventDestination(dest); err != nil {
		return fmt.Errorf("set flow destination: %w", err)
	}
	if err := queue.CheckReason(reason); err != nil {
		return fmt.Errorf("set flow destination: %w", err)
	}
	lock := []step{{what: "lock flow", sql: s.q(qLockSeq), args: []any{flow}, rows: func(pgx.Rows) error { return nil }}}
	err := s.withTxAfter(ctx, lock, func(tx pgx.Tx, a admission) error {
		now, _, err := s.admit(ctx, tx, a, now)
		if err != nil {
			return err
		}
		var old string
		err = tx.QueryRow(ctx, s.q(qFlowDest), flow).Scan(&old)
		if isNoRows(err) {
			return fmt.Errorf("%w: flow %q", queue.ErrNotFound, flow)
		}
		if err != nil {
			return fmt.Errorf("read flow: %w", err)
		}
		if dest != queue.DefaultDestination {
			d, err := s.readDest(ctx, tx, dest)
			if err != nil {
				return err
			}
			if !d.found {
				return fmt.Errorf("%w: %q", queue.ErrUnknownDestination, dest)
			}
		}
		for _, q := range []string{qSetFlowDest, qSetSeqDest} {
			if _, err := tx.Exec(ctx, s.q(q), flow, dest); err != nil {
				return fmt.Errorf("set destination: %w", err)
			}
		}
		return s.destAudit(ctx, tx, queue.AuditFlowDestination, queue.FlowDestinationChange{Flow: flow, Old: old, New: dest}, reason, now)
	})
	if err != nil {
		return fmt.Errorf("set destination of %q: %w", flow, err)
	}
	return nil
}

// ClaimFor is ClaimBatch that also leaves out what f says
// (docs/contract.md §7.11): the destinations it excludes, and more heads
// of a destination than its Room. f is checked first (queue.ErrInvalid).
func (s *Store) ClaimFor(ctx context.Context, now clock.Tick, n int, f queue.ClaimFilter) ([]queue.Claim, error) {
	if n < 1 {
		return nil, fmt.Errorf("claim for: %w: n is %d, want at least 1", queue.ErrInvalid, n)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("claim for: %w", err)
	}
	out, err := s.claim(withClaimFilter(ctx, f), now, n)
	if err != nil {
		return nil, fmt.Errorf("claim for: %w", err)
	}
	return out, nil
}

// SettleClaimFor is SettleClaimBatch whose claims also leave out what f
// says: the items settled as SettleBatch settles them, then up to n heads
// claimed as ClaimFor claims them, in one transaction. f and n are
// checked first (queue.ErrInvalid).
func (s *Store) SettleClaimFor(ctx context.Context, items []queue.SettleItem, now clock.Tick, n int, f queue.ClaimFilter) ([]queue.SettleResult, []queue.Claim, error) {
	if n < 0 {
		return nil, nil, fmt.Errorf("settle claim for: %w: n is %d, want at least 0", queue.ErrInvalid, n)
	}
	if err := f.Validate(); err != nil {
		return nil, nil, fmt.Errorf("settle claim for: %w", err)
	}
	// settleClaim (settleclaim.go) is SettleClaimBatch's body; its claim
	// (claimHeads) takes f from the context.
	out, cs, err := s.settleClaim(withClaimFilter(ctx, f), items, now, n)
	if err != nil {
		return nil, nil, fmt.Errorf("settle claim for: %w", err)
	}
	return out, cs, nil
}

// snapshotDests reads the destinations for a Snapshot: nil when none.
func (s *Store) snapshotDests(ctx context.Context, q querier) ([]queue.SnapshotDestination, error) {
	rows, _ := q.Query(ctx, s.q(qSnapDests))
	var out []queue.SnapshotDestination
	var d queue.SnapshotDestination
	_, err := pgx.ForEachRow(rows, []any{&d.Name, &d.URL, &d.Secrets, &d.Concurrency, &d.Rate, &d.Paused}, func() error {
		out = append(out, d)
		return nil
	})
	return out, err
}

// queueDestCheck queues, when some event of es names a destination, the
// read of which of those are registered, and returns the set it fills
// (nil when no event names one: a queue without destinations reads
// nothing more).
func (s *Store) queueDestCheck(pp *pipe, es []queue.Event) map[string]bool {
	var names []string
	for _, e := range es {
		if e.Destination != queue.DefaultDestination && !slices.Contains(names, e.Destination) {
			names = append(names, e.Destination)
		}
	}
	if names == nil {
		return nil
	}
	registered := make(map[string]bool, len(names))
	pp.query("read destinations", func(r pgx.Rows) error {
		var n string
		if err := r.Scan(&n); err != nil {
			return err
		}
		registered[n] = true
		return nil
	}, s.q(qDestExists), names)
	return registered
}

// checkDestination checks e's destination (pre prefixes the errors)
// against the registered ones and against its flow f (nil for a flow
// that is new, neither stored nor made earlier in the batch): a name not
// registered is queue.ErrUnknownDestination, a name other than the
// flow's queue.ErrDestinationMismatch (DefaultDestination on a later
// event means the flow's own). isNew reports a new flow, whose
// destination e names.
func checkDestination(pre string, e queue.Event, registered map[string]bool, f *flowRow) (isNew bool, err error) {
	if e.Destination != queue.DefaultDestination && !registered[e.Destination] {
		return false, fmt.Errorf("%s%w: %q", pre, queue.ErrUnknownDestination, e.Destination)
	}
	if f == nil {
		return true, nil
	}
	if e.Destination != queue.DefaultDestination && e.Destination != f.dest {
		return false, fmt.Errorf("%s%w: the flow delivers to %q, the event names %q", pre, queue.ErrDestinationMismatch, f.dest, e.Destination)
	}
	return false, nil
}
