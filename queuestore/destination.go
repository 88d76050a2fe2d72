package queuestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// Destinations (docs/contract.md §7.11): the registered receivers of a
// queue, the flows' destinations and the claim that leaves some out. The
// claim itself is claimHeads (claim.go); the design and its cost are in
// docs/decisions/destinations-in-the-store.md.

var _ queue.DestinationStore = (*Store)(nil)

// Destination, DestinationState and ClaimFilter are the queue module's.
type (
	Destination      = queue.Destination
	DestinationState = queue.DestinationState
	ClaimFilter      = queue.ClaimFilter
)

// The audit kinds of destinations (queue's).
const (
	AuditDestination       = queue.AuditDestination       // PutDestination
	AuditDestinationPause  = queue.AuditDestinationPause  // PauseDestination
	AuditDestinationResume = queue.AuditDestinationResume // ResumeDestination
	AuditFlowDestination   = queue.AuditFlowDestination   // SetFlowDestination
)

const (
	// qDestRooms reads, as one JSON array (a write transaction reads one
	// row per statement), what a claim needs of every registered destination:
	// its limits, pause, rate bucket and, for one with a concurrency limit
	// and not paused, its claims in flight whose lease has not expired at
	// ?1 (a range of events_dest_inflight; the claim keeps it at most the
	// limit).
	qDestRooms = `SELECT json_group_array(json_array(name, concurrency, rate, paused IS NOT NULL, tokens, refilled_at,
    CASE WHEN concurrency > 0 AND paused IS NULL THEN
        (SELECT count(*) FROM events AS e WHERE e.state = 'inflight' AND e.dest <> '' AND e.dest = d.name AND e.lease_until > ?1)
    ELSE 0 END))
FROM (SELECT * FROM destinations ORDER BY name) AS d`

	// qDestTakeTokens records destination ?1's bucket after a claim: ?2
	// thousandths as of tick ?3.
	qDestTakeTokens = `UPDATE destinations SET tokens = ?2, refilled_at = ?3 WHERE name = ?1`

	qDestRead = `SELECT url, secrets, concurrency, rate, paused, tokens, refilled_at FROM destinations WHERE name = ?1`

	qDestInsert = `INSERT INTO destinations (name, url, secrets, concurrency, rate, tokens, refilled_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)`

	qDestUpdate = `UPDATE destinations SET url = ?2, secrets = ?3, concurrency = ?4, rate = ?5, tokens = ?6, refilled_at = ?7
WHERE name = ?1`

	qDestCount = `SELECT count(*) FROM destinations`

	qDestPause = `UPDATE destinations SET paused = ?2 WHERE name = ?1`

	// qDestList is every destination with its operator's counts: its flows
	// and their backlog (a range of flows_dest), and its claims in flight
	// with unexpired leases at the clock mark (a range of
	// events_dest_inflight).
	qDestList = `SELECT d.name, d.url, d.secrets, d.concurrency, d.rate, d.paused,
    (SELECT count(*) FROM flows AS f WHERE f.dest <> '' AND f.dest = d.name),
    (SELECT coalesce(sum(f.last_seq - f.head_seq + 1), 0) FROM flows AS f WHERE f.dest <> '' AND f.dest = d.name AND f.head_seq IS NOT NULL),
    (SELECT count(*) FROM events AS e WHERE e.state = 'inflight' AND e.dest <> '' AND e.dest = d.name
        AND e.lease_until > (SELECT clock_mark FROM meta WHERE id = 1))
FROM destinations AS d ORDER BY d.name`

	// qSnapDests is every destinations row by name (the snapshot's and
	// RegisteredDestinations' read: the table alone).
	qSnapDests = `SELECT name, url, secrets, concurrency, rate, paused FROM destinations ORDER BY name`

	qFlowDest    = `SELECT dest FROM flows WHERE flow = ?1`
	qSetFlowDest = `UPDATE flows SET dest = ?2 WHERE flow = ?1`
)

func init() {
	writeQueries = append(writeQueries, qClaimEventDest, qClaimEventsDest, qPickDestKeys, qRotPickDestKeys, qPickDestKey, qRotPickDestKey, qPickKeys, qRotPickKeys, qLoadHeads, qClaimEventsDests, qDestRooms, qDestTakeTokens, qEventDest)
	readQueries = append(readQueries, qSnapDests)
}

// destRooms is the claim's cursors when destinations may be left out: one
// per destination with room > 0, the default destination's first (def, a
// cursor already read, when given). A destination's room is the least of n,
// the caller's f.Room, its concurrency limit minus its claims in flight
// with unexpired leases, and its rate tokens after the refill at now; 0
// when paused or in f.Exclude. The default destination has no limits of
// the store's.
func destRooms(ctx context.Context, tx *txn, now clock.Tick, n int, f ClaimFilter, def *cursor) ([]*cursor, error) {
	room := func(d string) int {
		if slices.Contains(f.Exclude, d) {
			return 0
		}
		if r, ok := f.Room[d]; ok {
			return min(n, r)
		}
		return n
	}
	var curs []*cursor
	if def == nil {
		if r := room(queue.DefaultDestination); r > 0 {
			curs = append(curs, &cursor{room: r, keys: true})
		}
	} else {
		curs = append(curs, def)
	}
	var js []byte
	if err := tx.QueryRowContext(ctx, qDestRooms, int64(now)).Scan(&js); err != nil {
		return nil, fmt.Errorf("read destinations: %w", err)
	}
	rd := jsonRows{b: js}
	rd.open()
	for first := true; rd.next(first); first = false {
		rd.open()
		name, _ := rd.str()
		var v [6]int64
		for i := range v {
			rd.element(false)
			v[i], _ = rd.int()
		}
		rd.end()
		if rd.err != nil {
			return nil, fmt.Errorf("read destinations: %w", rd.err)
		}
		conc, rate, paused, tokens, at, inflight := v[0], v[1], v[2] != 0, v[3], v[4], v[5]
		r := room(name)
		if paused || r == 0 {
			continue
		}
		if conc > 0 {
			r = min(r, int(max(0, conc-inflight)))
		}
		c := &cursor{dest: name, keys: true}
		if rate > 0 {
			c.rate = rate
			c.tokens = refill(tokens, at, rate, now)
			r = min(r, int(c.tokens/1000))
		}
		if r > 0 {
			c.room = r
			curs = append(curs, c)
		}
	}
	if rd.err != nil {
		return nil, fmt.Errorf("read destinations: %w", rd.err)
	}
	return curs, nil
}

// refill is a rate bucket of tokens thousandths as of tick at, refilled to
// now: rate thousandths a tick, at most rate * 1000 (a full 1000-tick
// window; 1000 ticks or more since at refill it whole, so no product
// overflows).
func refill(tokens, at, rate int64, now clock.Tick) int64 {
	capacity := rate * 1000
	dt := int64(now) - at
	if dt >= 1000 {
		return capacity
	}
	if dt > 0 {
		tokens += dt * rate
	}
	return min(tokens, capacity)
}

// claimDests is the JSON array of the claims' destinations, in order
// (names are [a-z0-9._-]: nothing to escape).
func claimDests(cs []Claim) string {
	b := []byte{'['}
	for i, c := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, c.Destination...)
		b = append(b, '"')
	}
	return string(append(b, ']'))
}

// ClaimFor is ClaimBatch that also leaves out what f says (docs/contract.md
// §7.11): the flows of the destinations in f.Exclude, and more than
// f.Room[d] heads of destination d; as every claim, it also leaves out the
// flows of a paused destination, of one at its concurrency limit and of one
// whose rate tokens are used up. It picks exactly the heads ClaimBatch
// would pick if the left-out flows did not exist, and a left-out flow keeps
// its served count, pass and place. f is checked first (ErrInvalid, as n <
// 1), and then nothing changes.
func (s *Store) ClaimFor(ctx context.Context, now clock.Tick, n int, f ClaimFilter) ([]Claim, error) {
	if n < 1 {
		return nil, fmt.Errorf("claim for: %w: n is %d, want at least 1", ErrInvalid, n)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("claim for: %w", err)
	}
	var out []Claim
	err := s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		out, err = claimFor(ctx, tx, a, n, f)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim for: %w", err)
	}
	if len(out) > 0 {
		s.call(HookClaimCommitted)
	}
	return out, nil
}

// SettleClaimFor is SettleClaimBatch whose claims also leave out what f
// says, as ClaimFor's. f is checked first with n (ErrInvalid), and then
// nothing changes.
func (s *Store) SettleClaimFor(ctx context.Context, items []SettleItem, now clock.Tick, n int, f ClaimFilter) ([]SettleResult, []Claim, error) {
	if n < 0 {
		return nil, nil, fmt.Errorf("settle claim for: %w: n is %d, want at least 0", ErrInvalid, n)
	}
	if err := f.Validate(); err != nil {
		return nil, nil, fmt.Errorf("settle claim for: %w", err)
	}
	out := make([]SettleResult, len(items))
	var cs []Claim
	err := s.withTx(ctx, func(tx *txn) error {
		cs = nil
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		if err := s.settleIn(ctx, tx, a, items, out); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		cs, err = claimFor(ctx, tx, a, n, f)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("settle claim for: %w", err)
	}
	if len(cs) > 0 {
		s.call(HookClaimCommitted)
	}
	return out, cs, nil
}

// storedDest is a destinations row.
type storedDest struct {
	d           Destination
	paused      sql.NullString
	tokens, at  int64
	secretsJSON string
}

func (sd storedDest) snapshot() queue.SnapshotDestination {
	return DestinationState{Destination: sd.d, SecretCount: len(sd.d.Secrets), Paused: sd.paused.Valid, PauseReason: sd.paused.String}.Snapshot()
}

// readDest reads the destination name (ok false when not registered).
func readDest(ctx context.Context, tx *txn, name string) (storedDest, bool, error) {
	sd := storedDest{d: Destination{Name: name}}
	var conc, rate int64
	err := tx.QueryRowContext(ctx, qDestRead, name).Scan(&sd.d.URL, &sd.secretsJSON, &conc, &rate, &sd.paused, &sd.tokens, &sd.at)
	if errors.Is(err, sql.ErrNoRows) {
		return storedDest{}, false, nil
	}
	if err != nil {
		return storedDest{}, false, fmt.Errorf("read destination: %w", err)
	}
	if err := json.Unmarshal([]byte(sd.secretsJSON), &sd.d.Secrets); err != nil {
		return storedDest{}, false, fmt.Errorf("%w: destination %s: secrets: %v", ErrCorrupt, name, err)
	}
	sd.d.Concurrency, sd.d.Rate = int(conc), int(rate)
	return sd, true, nil
}

// auditDest writes an audit row of kind k for the destination change c.
func auditDest(ctx context.Context, tx *txn, k AuditKind, c queue.DestinationChange, reason string, now clock.Tick) error {
	detail, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode destination change: %w", err)
	}
	if _, err := tx.ExecContext(ctx, qInsertAuditKind, k, reason, string(detail), int64(now)); err != nil {
		return fmt.Errorf("insert audit: %w", err)
	}
	return nil
}

// PutDestination registers d, or changes the registered destination of its
// name (URL, secrets, limits; a pause is kept), with an AuditDestination
// row (queue.DestinationChange: the settings before and after, secrets as
// their count). A new destination's rate bucket is full; a changed rate
// keeps the bucket's tokens up to the new capacity (a bucket that had no
// rate starts full). Checks: d (Destination.Validate: ErrInvalid), the
// reason (ErrEmptyReason, ErrInvalid), the tick; registering more than
// queue.MaxDestinations is ErrInvalid. On any error nothing changes.
func (s *Store) PutDestination(ctx context.Context, d Destination, reason string, now clock.Tick) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("put destination: %w", err)
	}
	if err := queue.CheckReason(reason); err != nil {
		return fmt.Errorf("put destination: %w", err)
	}
	secrets, err := json.Marshal(d.Secrets)
	if err != nil {
		return fmt.Errorf("put destination: encode secrets: %w", err)
	}
	err = s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		old, ok, err := readDest(ctx, tx, d.Name)
		if err != nil {
			return err
		}
		rate := int64(d.Rate)
		c := queue.DestinationChange{Name: d.Name}
		if !ok {
			var count int
			if err := tx.QueryRowContext(ctx, qDestCount).Scan(&count); err != nil {
				return fmt.Errorf("count destinations: %w", err)
			}
			if count >= queue.MaxDestinations {
				return fmt.Errorf("%w: %d destinations are registered, the most a queue keeps", ErrInvalid, count)
			}
			if _, err := tx.ExecContext(ctx, qDestInsert, d.Name, d.URL, string(secrets), d.Concurrency, d.Rate, rate*1000, int64(a.now)); err != nil {
				return fmt.Errorf("insert destination: %w", err)
			}
			c.New = storedDest{d: d}.snapshot()
		} else {
			tokens := refill(old.tokens, old.at, int64(old.d.Rate), a.now)
			if old.d.Rate == 0 {
				tokens = rate * 1000
			}
			tokens = min(tokens, rate*1000)
			if _, err := tx.ExecContext(ctx, qDestUpdate, d.Name, d.URL, string(secrets), d.Concurrency, d.Rate, tokens, int64(a.now)); err != nil {
				return fmt.Errorf("update destination: %w", err)
			}
			o := old.snapshot()
			c.Old = &o
			c.New = storedDest{d: d, paused: old.paused}.snapshot()
		}
		return auditDest(ctx, tx, AuditDestination, c, reason, a.now)
	})
	if err != nil {
		return fmt.Errorf("put destination %s: %w", d.Name, err)
	}
	return nil
}

// PauseDestination leaves the destination's flows out of every claim until
// ResumeDestination (claims in flight settle as usual; enqueues go on),
// with an AuditDestinationPause row. Checks: the name (ErrInvalid), the
// reason, the tick, the destination (ErrUnknownDestination), its pause
// (ErrDestinationPaused). On any error nothing changes.
func (s *Store) PauseDestination(ctx context.Context, name, reason string, now clock.Tick) error {
	if err := s.pauseDest(ctx, name, reason, now, true); err != nil {
		return fmt.Errorf("pause destination %s: %w", name, err)
	}
	return nil
}

// ResumeDestination undoes PauseDestination, with an
// AuditDestinationResume row; the destination's flows are claimed in
// their places at once. Checks as PauseDestination's, with
// ErrDestinationNotPaused for one not paused.
func (s *Store) ResumeDestination(ctx context.Context, name, reason string, now clock.Tick) error {
	if err := s.pauseDest(ctx, name, reason, now, false); err != nil {
		return fmt.Errorf("resume destination %s: %w", name, err)
	}
	return nil
}

func (s *Store) pauseDest(ctx context.Context, name, reason string, now clock.Tick, pausing bool) error {
	if err := queue.CheckDestinationName(name); err != nil {
		return err
	}
	if err := queue.CheckReason(reason); err != nil {
		return err
	}
	return s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		old, ok, err := readDest(ctx, tx, name)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %q", queue.ErrUnknownDestination, name)
		}
		neu := old
		kind := AuditDestinationPause
		switch {
		case pausing && old.paused.Valid:
			return fmt.Errorf("%w: since %q", queue.ErrDestinationPaused, old.paused.String)
		case pausing:
			neu.paused = sql.NullString{String: reason, Valid: true}
		case !old.paused.Valid:
			return queue.ErrDestinationNotPaused
		default:
			kind = AuditDestinationResume
			neu.paused = sql.NullString{}
		}
		if _, err := tx.ExecContext(ctx, qDestPause, name, neu.paused); err != nil {
			return fmt.Errorf("update destination: %w", err)
		}
		o := old.snapshot()
		return auditDest(ctx, tx, kind, queue.DestinationChange{Name: name, Old: &o, New: neu.snapshot()}, reason, a.now)
	})
}

// SetFlowDestination makes flow deliver to dest (DefaultDestination or a
// registered one) from its next claim on, with an AuditFlowDestination row
// (queue.FlowDestinationChange); a claim in flight keeps counting toward
// its old destination's concurrency until it is settled. Setting the
// destination a flow already has still writes the row. Checks: the
// destination's name (ErrInvalid), the reason, the flow's name, the tick,
// the flow (ErrNotFound), the destination (ErrUnknownDestination). On any
// error nothing changes.
func (s *Store) SetFlowDestination(ctx context.Context, flow, dest, reason string, now clock.Tick) error {
	if err := queue.CheckEventDestination(dest); err != nil {
		return fmt.Errorf("set flow destination: %w", err)
	}
	if err := queue.CheckReason(reason); err != nil {
		return fmt.Errorf("set flow destination: %w", err)
	}
	if err := queue.CheckFlow(flow); err != nil {
		return fmt.Errorf("set flow destination: %w", err)
	}
	err := s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		var old string
		err = tx.QueryRowContext(ctx, qFlowDest, flow).Scan(&old)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: flow %q", ErrNotFound, flow)
		}
		if err != nil {
			return fmt.Errorf("read flow: %w", err)
		}
		if dest != queue.DefaultDestination {
			if _, ok, err := readDest(ctx, tx, dest); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("%w: %q", queue.ErrUnknownDestination, dest)
			}
		}
		if _, err := tx.ExecContext(ctx, qSetFlowDest, flow, dest); err != nil {
			return fmt.Errorf("update flow: %w", err)
		}
		detail, err := json.Marshal(queue.FlowDestinationChange{Flow: flow, Old: old, New: dest})
		if err != nil {
			return fmt.Errorf("encode flow destination change: %w", err)
		}
		if _, err := tx.ExecContext(ctx, qInsertAuditKind, AuditFlowDestination, reason, string(detail), int64(a.now)); err != nil {
			return fmt.Errorf("insert audit: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("set destination of %q: %w", flow, err)
	}
	return nil
}

// Destinations lists every registered destination by name, with its
// secrets and its state (the relay reads RegisteredDestinations): paused,
// its flows and their
// backlog (a range of flows_dest each: an operator's read, not a hot
// path), and its claims in flight whose lease has not expired at the clock
// mark.
func (s *Store) Destinations(ctx context.Context) ([]DestinationState, error) {
	var out []DestinationState
	err := s.withReadTx(ctx, func(tx *txn) error {
		rows, err := tx.QueryContext(ctx, qDestList)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				d          DestinationState
				secrets    string
				conc, rate int64
				paused     sql.NullString
			)
			if err := rows.Scan(&d.Name, &d.URL, &secrets, &conc, &rate, &paused, &d.Flows, &d.Backlog, &d.Inflight); err != nil {
				return err
			}
			if err := json.Unmarshal([]byte(secrets), &d.Secrets); err != nil {
				return fmt.Errorf("%w: destination %s: secrets: %v", ErrCorrupt, d.Name, err)
			}
			d.Concurrency, d.Rate, d.SecretCount = int(conc), int(rate), len(d.Secrets)
			d.Paused, d.PauseReason = paused.Valid, paused.String
			out = append(out, d)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("destinations: %w", err)
	}
	return out, nil
}

// RegisteredDestinations lists every registered destination by name, with
// its settings and secrets: the destinations table alone, one read
// whatever the number of flows or events (docs/contract.md §7.11). The
// relay reads it to route and to know its destinations' breakers.
func (s *Store) RegisteredDestinations(ctx context.Context) ([]Destination, error) {
	var out []Destination
	err := s.withReadTx(ctx, func(tx *txn) error {
		sds, err := readDests(ctx, tx)
		for _, sd := range sds {
			out = append(out, sd.d)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("registered destinations: %w", err)
	}
	return out, nil
}

// snapshotDests reads the destinations table into snap.Destinations (nil
// when there is none), without secrets: their count only.
func snapshotDests(ctx context.Context, tx *txn, snap *Snapshot) error {
	sds, err := readDests(ctx, tx)
	for _, sd := range sds {
		snap.Destinations = append(snap.Destinations, sd.snapshot())
	}
	return err
}

// readDests reads every row of the destinations table, by name.
func readDests(ctx context.Context, tx *txn) ([]storedDest, error) {
	rows, err := tx.QueryContext(ctx, qSnapDests)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storedDest
	for rows.Next() {
		var (
			sd         storedDest
			conc, rate int64
		)
		if err := rows.Scan(&sd.d.Name, &sd.d.URL, &sd.secretsJSON, &conc, &rate, &sd.paused); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(sd.secretsJSON), &sd.d.Secrets); err != nil {
			return nil, fmt.Errorf("%w: destination %s: secrets: %v", ErrCorrupt, sd.d.Name, err)
		}
		sd.d.Concurrency, sd.d.Rate = int(conc), int(rate)
		out = append(out, sd)
	}
	return out, rows.Err()
}
