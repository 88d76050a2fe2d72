package queuestore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// The claim path, in both flow orders: Claim, ClaimBatch and
// SettleClaimBatch all run claimHeads (a single claim is a batch of one),
// and the order (claimOrder) supplies the statements in which
// FairMinServed and FairRotation differ. Every statement is driven by an
// index (see plan_test.go, plan_rotation_test.go): none scans events or
// flows, so a claim costs the same at 10 flows and at 100,000.
const (
	// qPromote turns on the ready flag of flows whose head became
	// dispatchable by now. Each flow is promoted at most once per head
	// change, so the cost is amortised over the writes that set ready_at.
	qPromote = `UPDATE flows SET ready = 1 WHERE ready = 0 AND ready_at <= ?1`

	// qPickHeads is fairness.MinServed in SQL: the next ?3 ready flows of
	// the destination ?4 after the flow (served ?1, flow ?2) in (served,
	// flow) order (one range of flows_ready) (BINARY
	// collation = Go's byte-wise string order), with each flow's head event
	// read in the same statement, as one JSON array of rows [the head's
	// columns with the body in hex, the flow's served count, the flow's
	// rowid, the event's rowid]. LEFT JOIN keeps flows_ready as the outer
	// loop and reports a ready flow without a head event (corrupt) as NULL
	// event columns instead of skipping it. The rows are read in index
	// order; claimHeads checks that order.
	qPickHeads = `SELECT json_group_array(json_array(flow, head_seq, id, state, attempts, lease_until,
    available_at, hex(body), generation, served, frow, erow)), EXISTS (SELECT 1 FROM destinations)
FROM (SELECT f.flow, f.head_seq, e.id, e.state, e.attempts, e.lease_until, e.available_at,
        e.body, e.generation, f.served, f.rowid AS frow, e.rowid AS erow
    FROM flows AS f LEFT JOIN events AS e ON e.flow = f.flow AND e.seq = f.head_seq
    WHERE f.ready = 1 AND f.dest = ?4 AND (f.served, f.flow) > (?1, ?2) ORDER BY f.served, f.flow LIMIT ?3)`

	// qPickDestKeys reads, for each destination of the JSON array ?1, the
	// keys of its first ?2 ready flows in (served, flow) order, as an array
	// [its index in ?1, rows...] of rows [flow, served, flow rowid]: a few
	// entries of each destination's range of flows_ready, read from the
	// index alone (it holds the key and the rowid). The heads of the flows
	// the claim takes are read after the merge (qLoadHeads), so a claim over
	// D destinations reads D short ranges of one index and n heads, not D
	// heads. (group_concat of the rows' text: json_group_array would parse
	// each row again.)
	qPickDestKeys = `SELECT '[' || group_concat('[' || k || coalesce(',' || h, '') || ']', ',') || ']' FROM (SELECT j.key AS k, (
    SELECT group_concat(r, ',') FROM (SELECT json_array(f.flow, f.served, f.rowid) AS r
    FROM flows AS f WHERE f.ready = 1 AND f.dest = j.value ORDER BY f.served, f.flow LIMIT ?2)) AS h
FROM json_each(?1) AS j)`

	// qPickDestKey is qPickDestKeys with one key each (no ?2): a
	// scalar subquery per destination, its first entry of flows_ready as
	// the text of a JSON row, which costs a destination with ready flows
	// less than qPickDestKeys' subquery and aggregate.
	qPickDestKey = `SELECT '[' || group_concat('[' || j.key || coalesce(',[' || (SELECT json_quote(f.flow) || ',' || f.served || ',' || f.rowid
    FROM flows AS f WHERE f.ready = 1 AND f.dest = j.value ORDER BY f.served, f.flow LIMIT 1) || ']', '') || ']', ',') || ']'
FROM json_each(?1) AS j`

	// qPickKeys is qPickDestKeys for one destination (?4): the keys of
	// its next ?3 ready flows after the flow (served ?1, flow ?2), as one
	// JSON array.
	qPickKeys = `SELECT json_group_array(json_array(flow, served, frow))
FROM (SELECT f.flow, f.served, f.rowid AS frow FROM flows AS f
    WHERE f.ready = 1 AND f.dest = ?4 AND (f.served, f.flow) > (?1, ?2) ORDER BY f.served, f.flow LIMIT ?3)`

	// qLoadHeads reads the heads of the flows whose rowids are the JSON
	// array ?1 (the flows a claim over destinations picked by their keys),
	// as one JSON array of rows [the index in ?1, flow, head_seq, the head's
	// columns with the body in hex, the event's rowid, weight, served]. The
	// list drives the loop (CROSS JOIN): each flow by its rowid, its head by
	// events' (flow, seq) key; LEFT JOIN reports a flow without its head
	// event (corrupt) as NULL event columns.
	qLoadHeads = `SELECT json_group_array(json_array(j.key, f.flow, f.head_seq, e.id, e.state, e.attempts, e.lease_until,
    e.available_at, hex(e.body), e.generation, e.rowid, f.weight, f.served))
FROM json_each(?1) AS j CROSS JOIN flows AS f LEFT JOIN events AS e ON e.flow = f.flow AND e.seq = f.head_seq
WHERE f.rowid = j.value`

	qQuarantineExpired = `UPDATE events SET state = 'quarantined', reason = 'lease_expired', lease_until = 0 WHERE id = ?1`

	qBlockFlow = `UPDATE flows SET ready_at = NULL, ready = 0 WHERE flow = ?1`

	// qClaimEvents claims the events whose rowids are the JSON array ?1;
	// the k-th (from 0) gets ticket ?3 + k. The list is materialized so
	// that the plan is always "scan the list, find each row by rowid"
	// (without it, a small analyzed table was scanned instead). OR FAIL: no
	// statement journal; any failure rolls back the whole transaction
	// anyway.
	qClaimEvents = `WITH j (r, k) AS MATERIALIZED (SELECT value, key FROM json_each(?1))
UPDATE OR FAIL events SET state = 'inflight', generation = generation + 1,
    attempts = attempts + 1, lifetime_attempts = lifetime_attempts + 1,
    lease_until = ?2, ticket = ?3 + j.k
FROM j WHERE events.rowid = j.r`

	// qClaimEventsDest is qClaimEvents for a queue with destinations: the
	// events' dest becomes ?4, the destination the claims are for
	// (docs/contract.md §7.11), so that events_dest_inflight counts them.
	// A queue that never registered one claims with qClaimEvents: all its
	// events' dest are '' already.
	qClaimEventsDest = `WITH j (r, k) AS MATERIALIZED (SELECT value, key FROM json_each(?1))
UPDATE OR FAIL events SET state = 'inflight', generation = generation + 1,
    attempts = attempts + 1, lifetime_attempts = lifetime_attempts + 1,
    lease_until = ?2, ticket = ?3 + j.k, dest = ?4
FROM j WHERE events.rowid = j.r`

	// qClaimEventsDests is qClaimEvents for claims of several destinations:
	// ?4 is the JSON array of their destinations, in the order of ?1.
	qClaimEventsDests = `WITH j (r, k, d) AS MATERIALIZED (SELECT value, key, ?4 ->> key FROM json_each(?1))
UPDATE OR FAIL events SET state = 'inflight', generation = generation + 1,
    attempts = attempts + 1, lifetime_attempts = lifetime_attempts + 1,
    lease_until = ?2, ticket = ?3 + j.k, dest = j.d
FROM j WHERE events.rowid = j.r`

	// qServeFlows serves the flows whose rowids are the JSON array ?1
	// (FairMinServed).
	qServeFlows = `WITH j (r) AS MATERIALIZED (SELECT value FROM json_each(?1))
UPDATE OR FAIL flows SET served = served + 1, ready_at = ?2, ready = 0
FROM j WHERE flows.rowid = j.r`

	qSetTicket = `UPDATE meta SET ticket = ?1 WHERE id = 1`

	// qClaimEvent and qServeFlow are qClaimEvents and qServeFlows for one
	// row (rowid ?1): a claim of exactly one event writes with them, because
	// the JSON-list statements cost a single claim about 8 µs more CPU, 7%
	// of a Claim+Settle on a memory file system
	// (docs/decisions/sqlite-claim-path.md). qClaimEventDest is the one-row
	// qClaimEventsDest.
	qClaimEvent = `UPDATE events SET state = 'inflight', generation = generation + 1,
    attempts = attempts + 1, lifetime_attempts = lifetime_attempts + 1,
    lease_until = ?2, ticket = ?3
WHERE rowid = ?1`
	qClaimEventDest = `UPDATE events SET state = 'inflight', generation = generation + 1,
    attempts = attempts + 1, lifetime_attempts = lifetime_attempts + 1,
    lease_until = ?2, ticket = ?3, dest = ?4
WHERE rowid = ?1`
	qServeFlow = `UPDATE flows SET served = served + 1, ready_at = ?2, ready = 0 WHERE rowid = ?1`
)

// ReasonLeaseExpired is queue.ReasonLeaseExpired: the reason a claim
// records when it quarantines an event whose last attempt of the round let
// its lease expire.
const ReasonLeaseExpired = queue.ReasonLeaseExpired

// Claim hands out the head of the flow that has been served least (ties to
// the smallest flow ID: fairness.MinServed) among the flows whose head is
// dispatchable at now: pending with available_at <= now, or inflight with an
// expired lease (a take-over). ok is false when nothing is dispatchable.
// Under the FairRotation policy the flow is instead the one with the
// smallest (pass, joined), and the claim advances the rotation's virtual
// time (docs/contract.md §7.6).
//
// In the same transaction the global ticket, the flow's served count, the
// event's generation, attempts and lifetime attempts grow by one, and the
// event is leased until now + Lease. A take-over of an event whose round is
// used up (attempts == MaxAttempts) is not claimed: it is quarantined with
// reason ReasonLeaseExpired (served, ticket and generation unchanged), with
// a history row (outcome Quarantined, no error text, the event's generation
// and attempts), and the claim picks again. Even when nothing is claimed, now is recorded as the
// clock mark.
func (s *Store) Claim(ctx context.Context, now clock.Tick) (Claim, bool, error) {
	cs, err := s.claim(ctx, now, 1)
	if err != nil {
		return Claim{}, false, fmt.Errorf("claim: %w", err)
	}
	if len(cs) == 0 {
		return Claim{}, false, nil
	}
	return cs[0], true, nil
}

// ClaimBatch hands out up to n heads of n different flows in one
// transaction, in exactly the order, and with exactly the tickets, served
// counts, generations, attempts and leases, that n successive Claim calls at
// the same now would give. It returns fewer (or none) when fewer flows are
// dispatchable. n must be at least 1 (ErrInvalid otherwise).
func (s *Store) ClaimBatch(ctx context.Context, now clock.Tick, n int) ([]Claim, error) {
	if n < 1 {
		return nil, fmt.Errorf("claim batch: %w: n is %d, want at least 1", ErrInvalid, n)
	}
	cs, err := s.claim(ctx, now, n)
	if err != nil {
		return nil, fmt.Errorf("claim batch: %w", err)
	}
	return cs, nil
}

func (s *Store) claim(ctx context.Context, now clock.Tick, n int) ([]Claim, error) {
	var out []Claim
	err := s.withTx(ctx, func(tx *txn) error {
		a, err := s.admit(ctx, tx, now)
		if err != nil {
			return err
		}
		out, err = claimIn(ctx, tx, a, n)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(out) > 0 {
		s.call(HookClaimCommitted)
	}
	return out, nil
}

// claimIn claims up to n heads inside tx, after admit (a), in the order of
// the recorded policy: the body of every claim transaction (Claim,
// ClaimBatch, SettleClaimBatch). It is claimFor with an empty filter: the
// store's own limits and pauses of destinations apply.
func claimIn(ctx context.Context, tx *txn, a admission, n int) ([]Claim, error) {
	return claimFor(ctx, tx, a, n, queue.ClaimFilter{})
}

// claimFor is claimIn that also leaves out what f says (ClaimFor,
// SettleClaimFor); f is valid.
func claimFor(ctx context.Context, tx *txn, a admission, n int, f queue.ClaimFilter) ([]Claim, error) {
	if isRotation(a.pol) {
		return claimHeads(ctx, tx, a, n, f, &rotationOrder{})
	}
	return claimHeads(ctx, tx, a, n, f, &minServedOrder{})
}

// A claimOrder is one flow order of the claim: the statements, and the
// columns of a picked row, in which FairMinServed (minServedOrder,
// docs/contract.md §2.3) and FairRotation (rotationOrder, §7.6) differ.
// claimHeads, the claim itself, is the same for both. An order keeps what
// the claims so far will write.
type claimOrder interface {
	// promoteSQL turns on the ready flag of the flows whose head is
	// dispatchable at ?1.
	promoteSQL() string
	// pickSQL reads, as one JSON array, the next ?3 ready flows of the
	// destination ?4 after the key (?1, ?2), each row: flow, head_seq, id,
	// state, attempts, lease_until, available_at, hex(body), generation,
	// then the order's own columns (readKey), then the flow's and the
	// event's rowids; and, as a second column, whether any destination is
	// registered.
	pickSQL() string
	// keysSQL is pickSQL's first column with the keys only: rows as
	// readKeyRow reads them.
	keysSQL() string
	// destKeysSQL reads, as one JSON array, the keys of the first ?2 ready
	// flows (an array of rows as keysSQL's) of each destination of the
	// JSON array ?1, in its order.
	destKeysSQL() string
	// destKeySQL is destKeysSQL for one key of each destination.
	destKeySQL() string
	// start is the key (?1, ?2) before every flow; after the key of h.
	start() (any, any)
	after(h *headRow) (any, any)
	// readKey reads the order's own columns of h's row from r (each after
	// a comma).
	readKey(r *jsonRows, h *headRow)
	// readKeyRow reads a whole row of keysSQL from r: the order's key and
	// the flow's rowid.
	readKeyRow(r *jsonRows, h *headRow)
	// less reports whether a comes before b in the order.
	less(a, b *headRow) bool
	// claimed records that h's flow was claimed.
	claimed(h *headRow)
	// finish writes, after the events' claims, the claimed flows (leased
	// until lease; one flow, with rowid last, when claims is 1) and the
	// queue's ticket (the last one handed out) and clock.
	finish(ctx context.Context, tx *txn, lease clock.Tick, ticket int64, claims int, last int64) error
}

// headRow is one row of a pick: a ready flow and, when full, its head
// event (a row read by its keys only gets its head from loadHeads).
type headRow struct {
	flow                               string
	headSeq, nAttempts, nLease, nAvail sql.NullInt64
	nGen, eRow                         sql.NullInt64
	id, state                          sql.NullString
	body                               []byte
	fRowid                             int64
	k1, k2                             int64 // the order's key: (served, -) then flow, or (pass, joined)
	weight                             int
	served                             int64
	full                               bool // the head's columns are read
}

// A cursor reads one destination's range of the ready index in the order,
// a page at a time: the heads a claim may take from that destination.
type cursor struct {
	dest string
	room int       // how many more heads the claim may take from it
	keys bool      // read the keys only: the claim loads the heads it takes
	buf  []headRow // every row read so far, in order
	i    int       // the next row of buf
	done bool      // the last page was short: no more rows

	// The destination's rate bucket (rate > 0): tokens (thousandths) after
	// the refill at now; claims taken.
	rate, tokens int64
	took         int64
}

// last is the last row cur read (nil before its first page).
func (cur *cursor) last() *headRow {
	if len(cur.buf) == 0 {
		return nil
	}
	return &cur.buf[len(cur.buf)-1]
}

// fill reads cur's next page of up to limit rows after its last row: whole
// rows, or the keys only when cur.keys. It reports whether any destination
// is registered (a page of keys is read only when one is).
func fill(ctx context.Context, tx *txn, ord claimOrder, cur *cursor, limit int) (bool, error) {
	k1, k2 := ord.start()
	if l := cur.last(); l != nil {
		k1, k2 = ord.after(l)
	}
	var (
		js       []byte
		hasDests int64 = 1
		err      error
	)
	if cur.keys {
		err = tx.QueryRowContext(ctx, ord.keysSQL(), k1, k2, limit, cur.dest).Scan(&js)
	} else {
		err = tx.QueryRowContext(ctx, ord.pickSQL(), k1, k2, limit, cur.dest).Scan(&js, &hasDests)
	}
	if err != nil {
		return false, fmt.Errorf("pick flows: %w", err)
	}
	had := len(cur.buf)
	r := jsonRows{b: js}
	r.open()
	for first := true; r.next(first); first = false {
		if err := readHead(&r, ord, cur); err != nil {
			return false, err
		}
	}
	if r.err != nil {
		return false, r.err
	}
	if len(cur.buf)-had < limit {
		cur.done = true
	}
	return hasDests != 0, nil
}

// readHead reads one pick row from r into cur's rows (a row of keys when
// cur.keys), checking that it comes after the row read before it.
func readHead(r *jsonRows, ord claimOrder, cur *cursor) error {
	var h headRow
	if cur.keys {
		ord.readKeyRow(r, &h)
	} else {
		h.full = true
		r.open()
		h.readEvent(r)
		ord.readKey(r, &h)
		r.element(false)
		h.fRowid, _ = r.int()
		r.element(false)
		h.eRow.Int64, h.eRow.Valid = r.int()
		r.end()
	}
	if r.err != nil {
		return r.err
	}
	if l := cur.last(); l != nil && !ord.less(l, &h) {
		return fmt.Errorf("%w: pick flows: flow (rowid %d) after flow (rowid %d) in destination %q", ErrCorrupt, h.fRowid, l.fRowid, cur.dest)
	}
	cur.buf = append(cur.buf, h)
	return nil
}

// fillHeads reads the keys of the first ready flows of each of curs (none
// read yet), all in one statement: a claim over many destinations reads a
// few index entries of each, not a page, and no head. It reads one key of
// each for a claim of one head, else two, so that a destination just
// claimed from still has its next key: most claims of a batch then need
// no other read. A cursor that got fewer rows than asked is done.
func fillHeads(ctx context.Context, tx *txn, ord claimOrder, curs []*cursor, n int) error {
	b := []byte{'['}
	for i, c := range curs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, c.dest)
	}
	k, q, args := 1, ord.destKeySQL(), []any{string(append(b, ']'))}
	if n > 1 {
		k, q, args = 2, ord.destKeysSQL(), append(args, 2)
	}
	var js []byte
	if err := tx.QueryRowContext(ctx, q, args...).Scan(&js); err != nil {
		return fmt.Errorf("pick destinations' heads: %w", err)
	}
	r := jsonRows{b: js}
	r.open()
	i := 0
	for first := true; r.next(first); first = false {
		if i == len(curs) {
			return fmt.Errorf("%w: pick destinations' heads: more rows than destinations", ErrCorrupt)
		}
		c := curs[i]
		r.open()
		if k, _ := r.int(); k != int64(i) {
			return fmt.Errorf("%w: pick destinations' heads: row %d is destination %d's", ErrCorrupt, i, k)
		}
		i++
		for r.next(false) {
			if err := readHead(&r, ord, c); err != nil {
				return err
			}
		}
		c.done = len(c.buf) < k
	}
	if r.err != nil {
		return r.err
	}
	if i != len(curs) {
		return fmt.Errorf("%w: pick destinations' heads: %d rows for %d destinations", ErrCorrupt, i, len(curs))
	}
	return nil
}

// A pick is a row the merge took: the i-th row of c.
type pick struct {
	c *cursor
	i int
}

// loadHeads reads, in one statement, the heads of the picks read by their
// keys only (none: no statement).
func loadHeads(ctx context.Context, tx *txn, picks []pick) error {
	var (
		rows []byte
		idx  []int // the picks in the order of rows
	)
	for j, p := range picks {
		if !p.c.buf[p.i].full {
			rows = appendRowid(rows, p.c.buf[p.i].fRowid)
			idx = append(idx, j)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	var js []byte
	if err := tx.QueryRowContext(ctx, qLoadHeads, string(append(rows, ']'))).Scan(&js); err != nil {
		return fmt.Errorf("read picked heads: %w", err)
	}
	r := jsonRows{b: js}
	r.open()
	got := 0
	for first := true; r.next(first); first = false {
		r.open()
		k, _ := r.int()
		if k < 0 || k >= int64(len(idx)) {
			return fmt.Errorf("%w: read picked heads: row of pick %d of %d", ErrCorrupt, k, len(idx))
		}
		p := picks[idx[k]]
		h := &p.c.buf[p.i]
		if h.full {
			return fmt.Errorf("%w: read picked heads: pick %d read twice", ErrCorrupt, k)
		}
		r.element(false)
		h.readEvent(&r)
		r.element(false)
		h.eRow.Int64, h.eRow.Valid = r.int()
		r.element(false)
		w, _ := r.int()
		h.weight = int(w)
		r.element(false)
		h.served, _ = r.int()
		r.end()
		h.full = true
		got++
	}
	if r.err != nil {
		return fmt.Errorf("read picked heads: %w", r.err)
	}
	if got != len(idx) {
		return fmt.Errorf("%w: read picked heads: %d rows for %d flows", ErrCorrupt, got, len(idx))
	}
	return nil
}

// refillPage is the most rows a claim over several destinations reads of
// one destination at a time after its first: the claim takes the least key
// of all destinations' next rows, so a longer page is mostly read for
// nothing.
const refillPage = 8

// claimHeads is n successive claims in one transaction (after admit), in
// the order ord, with few statements. A claim takes its flow out of the
// ready set (ready = 0), and so does the quarantine of a used-up take-over;
// nothing else in a claim changes another flow, and no flow enters the set
// within the transaction. So n successive picks are the first heads of the
// ready flows in the order: one read returns the next n - len(out) of them
// after the last flow read, and the claims' writes to events and flows are
// made at the end, one statement each (a single claim is a batch of one;
// only its two writes use the one-row statements).
// A used-up take-over is quarantined at once and counts no claim, so then
// the picks after it are put back and the merge goes on from it.
//
// Destinations (docs/contract.md §7.11): the ready index is
// destination-prefixed. With no destination registered and an empty
// filter, the claim reads the default destination's range only (its first
// read says whether any destination is registered): today's plan. With
// destinations, each destination gets its room (destRooms) and the claim
// merges the ranges of those with room > 0 in the order's key, taking at
// most room(d) heads of destination d: the global order restricted to the
// flows not left out, which keep their served count, pass and place. The
// ranges are read by their keys only (the index's entries); the heads of
// the flows the merge picked are then read in one statement (loadHeads),
// so the claim reads one head per pick, not one per destination.
func claimHeads(ctx context.Context, tx *txn, a admission, n int, f queue.ClaimFilter, ord claimOrder) ([]Claim, error) {
	now, pol, ticket := a.now, a.pol, a.ticket
	if _, err := tx.ExecContext(ctx, ord.promoteSQL(), int64(now)); err != nil {
		return nil, fmt.Errorf("promote ready flows: %w", err)
	}
	lease := now + pol.Lease
	var (
		curs     []*cursor
		hasDests = true // whether any destination is registered
	)
	if len(f.Exclude) == 0 && len(f.Room) == 0 {
		def := &cursor{room: n}
		var err error
		if hasDests, err = fill(ctx, tx, ord, def, n); err != nil {
			return nil, err
		}
		if curs = []*cursor{def}; hasDests {
			def.keys = true // its rows read so far are whole; the next are keys
			if curs, err = destRooms(ctx, tx, now, n, f, def); err != nil {
				return nil, err
			}
		}
	} else {
		var err error
		if curs, err = destRooms(ctx, tx, now, n, f, nil); err != nil {
			return nil, err
		}
	}
	var fresh []*cursor // the destinations' cursors not read yet
	for _, c := range curs {
		if len(c.buf) == 0 && !c.done {
			fresh = append(fresh, c)
		}
	}
	if len(fresh) > 0 {
		if err := fillHeads(ctx, tx, ord, fresh, n); err != nil {
			return nil, err
		}
	}
	var (
		out                []Claim
		evRows             []byte
		lastERow, lastFRow int64 // the rowids of the last event and flow claimed
		mixed              bool  // the claims' destinations differ
		picks              []pick
	)
	first := ticket + 1
merge:
	for len(out) < n {
		// The merge picks the next n - len(out) flows by their keys,
		// taking room as if each were claimed.
		picks = picks[:0]
		for len(out)+len(picks) < n {
			var best *cursor
			for _, c := range curs {
				if c.room == 0 {
					continue
				}
				if c.i == len(c.buf) && !c.done {
					// A page of the rest of its room, at most refillPage
					// rows when several destinations share the claim.
					limit := min(c.room, n-len(out)-len(picks))
					if len(curs) > 1 {
						limit = min(limit, refillPage)
					}
					if _, err := fill(ctx, tx, ord, c, limit); err != nil {
						return nil, err
					}
				}
				if c.i < len(c.buf) && (best == nil || ord.less(&c.buf[c.i], &best.buf[best.i])) {
					best = c
				}
			}
			if best == nil {
				break // no more ready flows with room
			}
			picks = append(picks, pick{c: best, i: best.i})
			best.i++
			best.room--
		}
		if len(picks) == 0 {
			break
		}
		if err := loadHeads(ctx, tx, picks); err != nil {
			return nil, err
		}
		for j, p := range picks {
			h := &p.c.buf[p.i]
			flow := h.flow
			if !h.headSeq.Valid {
				return nil, fmt.Errorf("%w: flow %q is ready without a head", ErrCorrupt, flow)
			}
			if !h.id.Valid {
				return nil, fmt.Errorf("%w: flow %q has no event at its head seq %d", ErrCorrupt, flow, h.headSeq.Int64)
			}
			id, state := h.id.String, h.state.String
			attempts, leaseUntil, availAt := int(h.nAttempts.Int64), clock.Tick(h.nLease.Int64), clock.Tick(h.nAvail.Int64)
			switch {
			case state == queue.StateInflight && leaseUntil <= now && attempts >= pol.MaxAttempts:
				if _, err := tx.ExecContext(ctx, qQuarantineExpired, id); err != nil {
					return nil, fmt.Errorf("quarantine %q: %w", id, err)
				}
				if _, err := tx.ExecContext(ctx, qBlockFlow, flow); err != nil {
					return nil, fmt.Errorf("block flow %q: %w", flow, err)
				}
				if err := recordFailure(ctx, tx, id, h.nGen.Int64, attempts, Quarantined, ReasonLeaseExpired, "", now); err != nil {
					return nil, err
				}
				// It costs no room, and the picks after it were made
				// with one room less of its destination: put them back
				// (each is its cursor's last taken) and merge again.
				p.c.room++
				for _, q := range picks[j+1:] {
					q.c.i--
					q.c.room++
				}
				continue merge
			case state == queue.StateInflight && leaseUntil <= now:
			case state == queue.StatePending && availAt <= now:
			default:
				return nil, fmt.Errorf("%w: flow %q is ready but its head %q is %s", ErrCorrupt, flow, id, state)
			}
			// qClaimEvents adds one to generation, attempts and lifetime
			// attempts of the rows just read in this transaction: the claim
			// reports the same values without reading them back.
			ticket++
			out = append(out, Claim{EventID: id, Flow: flow, Seq: h.headSeq.Int64, Body: h.body,
				Generation: h.nGen.Int64 + 1, Attempts: attempts + 1, Ticket: ticket, LeaseUntil: lease, Destination: p.c.dest})
			mixed = mixed || p.c.dest != out[0].Destination
			evRows = appendRowid(evRows, h.eRow.Int64)
			ord.claimed(h)
			lastERow, lastFRow = h.eRow.Int64, h.fRowid
			p.c.took++
		}
	}
	if len(out) == 0 {
		return out, nil
	}
	var (
		res sql.Result
		err error
	)
	switch {
	case !hasDests && len(out) == 1:
		res, err = tx.ExecContext(ctx, qClaimEvent, lastERow, int64(lease), first)
	case !hasDests:
		res, err = tx.ExecContext(ctx, qClaimEvents, string(append(evRows, ']')), int64(lease), first)
	case len(out) == 1:
		res, err = tx.ExecContext(ctx, qClaimEventDest, lastERow, int64(lease), first, out[0].Destination)
	case !mixed:
		res, err = tx.ExecContext(ctx, qClaimEventsDest, string(append(evRows, ']')), int64(lease), first, out[0].Destination)
	default:
		res, err = tx.ExecContext(ctx, qClaimEventsDests, string(append(evRows, ']')), int64(lease), first, claimDests(out))
	}
	if err != nil {
		return nil, fmt.Errorf("claim events: %w", err)
	}
	if k, err := res.RowsAffected(); err != nil || k != int64(len(out)) {
		return nil, fmt.Errorf("claim events: updated %d rows (%v), want %d", k, err, len(out))
	}
	if err := ord.finish(ctx, tx, lease, ticket, len(out), lastFRow); err != nil {
		return nil, err
	}
	for _, c := range curs {
		if c.rate > 0 && c.took > 0 {
			if _, err := tx.ExecContext(ctx, qDestTakeTokens, c.dest, c.tokens-1000*c.took, int64(now)); err != nil {
				return nil, fmt.Errorf("destination %s: take rate tokens: %w", c.dest, err)
			}
		}
	}
	return out, nil
}

// minServedOrder is FairMinServed: fairness.MinServed, the flow served
// least, ties to the smallest flow ID.
type minServedOrder struct {
	flowRows []byte // the claimed flows' rowids, a JSON array (not yet closed)
}

func (o *minServedOrder) promoteSQL() string          { return qPromote }
func (o *minServedOrder) pickSQL() string             { return qPickHeads }
func (o *minServedOrder) keysSQL() string             { return qPickKeys }
func (o *minServedOrder) destKeysSQL() string         { return qPickDestKeys }
func (o *minServedOrder) destKeySQL() string          { return qPickDestKey }
func (o *minServedOrder) start() (any, any)           { return int64(-1), "" }
func (o *minServedOrder) after(h *headRow) (any, any) { return h.k1, h.flow }

func (o *minServedOrder) readKey(r *jsonRows, h *headRow) {
	r.element(false)
	h.k1, _ = r.int()
	h.served = h.k1
}

func (o *minServedOrder) readKeyRow(r *jsonRows, h *headRow) {
	r.open()
	h.flow, _ = r.str()
	r.element(false)
	h.k1, _ = r.int()
	h.served = h.k1
	r.element(false)
	h.fRowid, _ = r.int()
	r.end()
}

func (o *minServedOrder) less(a, b *headRow) bool {
	return a.k1 < b.k1 || a.k1 == b.k1 && a.flow < b.flow
}

func (o *minServedOrder) claimed(h *headRow) { o.flowRows = appendRowid(o.flowRows, h.fRowid) }

func (o *minServedOrder) finish(ctx context.Context, tx *txn, lease clock.Tick, ticket int64, claims int, last int64) error {
	var (
		res sql.Result
		err error
	)
	if claims == 1 {
		res, err = tx.ExecContext(ctx, qServeFlow, last, int64(lease))
	} else {
		res, err = tx.ExecContext(ctx, qServeFlows, string(append(o.flowRows, ']')), int64(lease))
	}
	if err != nil {
		return fmt.Errorf("serve flows: %w", err)
	}
	if k, err := res.RowsAffected(); err != nil || k != int64(claims) {
		return fmt.Errorf("serve flows: updated %d rows (%v), want %d", k, err, claims)
	}
	if _, err := tx.ExecContext(ctx, qSetTicket, ticket); err != nil {
		return fmt.Errorf("record ticket: %w", err)
	}
	return nil
}

// appendRowid appends rowid to the JSON array of integers in b, opening it
// when b is empty; the caller closes it.
func appendRowid(b []byte, rowid int64) []byte {
	if len(b) == 0 {
		b = append(b, '[')
	} else {
		b = append(b, ',')
	}
	return strconv.AppendInt(b, rowid, 10)
}

// readEvent reads a head row's flow and event columns, flow through
// generation, in the order both pick statements (qPickHeads and the
// picked heads' load) give them.
func (h *headRow) readEvent(r *jsonRows) {
	h.flow, _ = r.str()
	r.element(false)
	h.headSeq.Int64, h.headSeq.Valid = r.int()
	r.element(false)
	h.id.String, h.id.Valid = r.str()
	r.element(false)
	h.state.String, h.state.Valid = r.str()
	r.element(false)
	h.nAttempts.Int64, h.nAttempts.Valid = r.int()
	r.element(false)
	h.nLease.Int64, h.nLease.Valid = r.int()
	r.element(false)
	h.nAvail.Int64, h.nAvail.Valid = r.int()
	r.element(false)
	h.body, _ = r.blob()
	r.element(false)
	h.nGen.Int64, h.nGen.Valid = r.int()
}
