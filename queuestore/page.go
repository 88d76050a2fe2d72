package queuestore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// Paged reads for an operator's console: a page by name is one range of
// the flows' primary key (keyset paging), the same cost on the first page
// of 100,000 flows as on the last; a page in another order reads the flows
// once and keeps the first Limit+1 (a bounded sort), so that no enqueue,
// claim or ack pays for an operator's order
// (docs/decisions/operator-reads-off-the-claim-path.md). The audit and the
// quarantined events are ranges of their indexes. See page_plan_test.go
// for the plans.

// The paged reads' types are queue's (see the queue module for each one's
// documentation); the names stay here as aliases for callers of this
// package.
type (
	// FlowSort is queue.FlowSort: an order of FlowsPage.
	FlowSort = queue.FlowSort
	// FlowQuery is queue.FlowQuery: one page of flows asked for.
	FlowQuery = queue.FlowQuery
	// FlowPage is queue.FlowPage: one page of flows.
	FlowPage = queue.FlowPage
	// AuditQuery is queue.AuditQuery: one page of audit rows asked for.
	AuditQuery = queue.AuditQuery
	// AuditPage is queue.AuditPage: one page of audit rows.
	AuditPage = queue.AuditPage
	// QuarantinedQuery is queue.QuarantinedQuery: one page of quarantined
	// events asked for.
	QuarantinedQuery = queue.QuarantinedQuery
	// QuarantinedPage is queue.QuarantinedPage: one page of quarantined
	// events.
	QuarantinedPage = queue.QuarantinedPage
	// ReasonCount is queue.ReasonCount: quarantined events of one reason.
	ReasonCount = queue.ReasonCount
)

// The orders of FlowsPage and the page limits (queue's).
const (
	SortByFlow       = queue.SortByFlow
	SortByBacklog    = queue.SortByBacklog
	SortByServed     = queue.SortByServed
	SortByBlocked    = queue.SortByBlocked
	DefaultPageLimit = queue.DefaultPageLimit
	MaxPageLimit     = queue.MaxPageLimit
)

// sortKeys are the key expressions of the orders other than by name, over
// the columns of flows. No index holds them (migration 8 dropped those of
// migrations 2 and 3): their columns change with every enqueue, claim and
// ack.
var sortKeys = map[FlowSort]string{
	// -backlog: a flow's backlog is last_seq - head_seq + 1 (events after
	// the head are never claimed, so all of them wait).
	SortByBacklog: `(CASE WHEN head_seq IS NULL THEN 0 ELSE head_seq - last_seq - 1 END)`,
	SortByServed:  `(-served)`,
	SortByBlocked: `(CASE WHEN head_seq IS NULL THEN 3 WHEN ready_at IS NULL THEN 0 WHEN ready = 0 THEN 1 ELSE 2 END)`,
}

// prefixEnd is the smallest string above every valid UTF-8 string that
// starts with p: p followed by the byte 0xF5, which valid UTF-8 never holds
// (names compare as bytes).
func prefixEnd(p string) string { return p + "\xf5" }

const qFlowCols = `f.flow, f.served, f.last_seq, coalesce(f.head_seq, 0), coalesce(e.state, ''), f.ready_at,
    CASE WHEN f.head_seq IS NULL THEN 0 ELSE f.last_seq - f.head_seq + 1 END, f.weight, f.paused, f.dest`

// flowsPageQuery builds the statement of one page: forward (ascending
// from a cursor) or backward (descending to a cursor, reversed by the
// caller). By name it is a range of the primary key. By a key, the inner
// statement reads the flows (those of the prefix's range of names with a
// prefix) and keeps the first ?5 in (key, name) order past the cursor, and
// only those rows are joined to their heads' events. Parameters: ?1 cursor
// key, ?2 cursor flow, ?3 prefix, ?4 prefix end, ?5 rows wanted.
func flowsPageQuery(key string, cursor, backward, prefix bool) string {
	op, dir := ">", ""
	if backward {
		op, dir = "<", " DESC"
	}
	var where []string
	if cursor && key == "" {
		where = append(where, "f.flow "+op+" ?2")
	}
	if cursor && key != "" {
		where = append(where, "("+key+", f.flow) "+op+" (?1, ?2)")
	}
	if prefix {
		where = append(where, "f.flow >= ?3 AND f.flow < ?4")
	}
	cond := ""
	if len(where) > 0 {
		cond = "\nWHERE " + strings.Join(where, " AND ")
	}
	const head = `
LEFT JOIN events e ON e.flow = f.flow AND e.seq = f.head_seq`
	if key == "" {
		return "SELECT " + qFlowCols + ", 0\nFROM flows f" + head + cond + "\nORDER BY f.flow" + dir + "\nLIMIT ?5"
	}
	return "SELECT " + qFlowCols + ", f.k\nFROM (SELECT f.*, " + key + " AS k FROM flows f" + cond +
		"\n    ORDER BY k" + dir + ", f.flow" + dir + " LIMIT ?5) f" + head + "\nORDER BY f.k" + dir + ", f.flow" + dir
}

// FlowsPage returns one page of flows in the query's order. By name it
// seeks to its cursor and reads Limit+1 entries of the primary key,
// whatever its position; in another order it reads the flows (those of the
// Prefix when it has one) and keeps the first Limit+1 past its cursor
// (BenchmarkFlowsPage). Bad input (unknown sort, limit outside
// 1..MaxPageLimit, a cursor it did not hand out, more than one of
// After/Before/Last) is ErrInvalid.
func (s *Store) FlowsPage(ctx context.Context, q FlowQuery) (FlowPage, error) {
	n, cur, err := q.Check()
	if err != nil {
		return FlowPage{}, fmt.Errorf("flows page: %w", err)
	}
	key := sortKeys[q.Sort] // "" by name
	cursor := q.After != "" || q.Before != ""
	backward := q.Before != "" || q.Last
	stmt := flowsPageQuery(key, cursor, backward, q.Prefix != "")
	var page FlowPage
	var keys []int64
	err = s.withReadTx(ctx, func(tx *txn) error {
		var mark int64
		if err := tx.QueryRowContext(ctx, qClockMark).Scan(&mark); err != nil {
			return err
		}
		page.Mark = clock.Tick(mark)
		rows, err := tx.QueryContext(ctx, stmt, cur.Key, cur.Flow, q.Prefix, prefixEnd(q.Prefix), n+1)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var f FlowState
			var readyAt sql.NullInt64
			var paused sql.NullString
			var k int64
			if err := rows.Scan(&f.Flow, &f.Served, &f.LastSeq, &f.HeadSeq, &f.HeadState, &readyAt, &f.Backlog, &f.Weight, &paused, &f.Destination, &k); err != nil {
				return err
			}
			f.Paused, f.PauseReason = paused.Valid, paused.String
			if readyAt.Valid {
				t := clock.Tick(readyAt.Int64)
				f.ReadyAt = &t
			}
			page.Flows = append(page.Flows, f)
			keys = append(keys, k)
		}
		return rows.Err()
	})
	if err != nil {
		return FlowPage{}, fmt.Errorf("flows page: %w", err)
	}
	page.Finish(q, n, page.Flows, keys)
	return page, nil
}

const qClockMark = `SELECT clock_mark FROM meta WHERE id = 1`

// ClockMark returns the store's clock mark, the highest tick it has
// recorded, and nothing else: one row read (Stats, which also counts every
// event by state, reads the whole events table).
func (s *Store) ClockMark(ctx context.Context) (clock.Tick, error) {
	var mark int64
	if err := s.db.QueryRowContext(ctx, qClockMark).Scan(&mark); err != nil {
		return 0, fmt.Errorf("clock mark: %w", err)
	}
	return clock.Tick(mark), nil
}

const (
	qAuditPage = `SELECT id, kind, event_id, generation, reason, detail, at FROM audit
WHERE id < ?1 ORDER BY id DESC LIMIT ?2`
	qAuditPageEvent = `SELECT id, kind, event_id, generation, reason, detail, at FROM audit
WHERE event_id = ?3 AND id < ?1 ORDER BY id DESC LIMIT ?2`
)

// AuditPage returns one page of the audit, newest first, read through the
// audit's primary key (or the audit_event index for one event). Bad input
// (a negative Before, a limit outside 1..MaxPageLimit, an event ID that
// could never be stored) is ErrInvalid.
func (s *Store) AuditPage(ctx context.Context, q AuditQuery) (AuditPage, error) {
	n, before, err := q.Check()
	if err != nil {
		return AuditPage{}, fmt.Errorf("audit page: %w", err)
	}
	stmt := qAuditPage
	if q.EventID != "" {
		stmt = qAuditPageEvent
	}
	rows, err := s.db.QueryContext(ctx, stmt, before, n+1, q.EventID)
	if err != nil {
		return AuditPage{}, fmt.Errorf("audit page: %w", err)
	}
	defer rows.Close()
	page := AuditPage{Entries: []AuditRecord{}}
	for rows.Next() {
		var (
			a      AuditRecord
			kind   string
			ev     sql.NullString
			gen    sql.NullInt64
			detail sql.NullString
			at     int64
		)
		if err := rows.Scan(&a.ID, &kind, &ev, &gen, &a.Reason, &detail, &at); err != nil {
			return AuditPage{}, fmt.Errorf("audit page: %w", err)
		}
		a.Kind, a.EventID, a.Generation, a.Detail, a.At = AuditKind(kind), ev.String, gen.Int64, detail.String, clock.Tick(at)
		page.Entries = append(page.Entries, a)
	}
	if err := rows.Err(); err != nil {
		return AuditPage{}, fmt.Errorf("audit page: %w", err)
	}
	if len(page.Entries) > n {
		page.Entries = page.Entries[:n]
		page.Next = page.Entries[n-1].ID
	}
	return page, nil
}

// quarantinedPageQuery is the statement of one page of quarantined events
// matching f after the cursor (?1 flow, ?2 seq), and the count of all that
// match; each goes through events_quarantined, or events_quarantined_reason
// when f has a reason (page_plan_test.go).
func quarantinedPageQuery(f RedriveFilter) (page, count string, args []any) {
	where := "state = 'quarantined'"
	if f.Flow != "" {
		args = append(args, f.Flow)
		where += fmt.Sprintf(" AND flow = ?%d", len(args)+2)
	}
	if f.Reason != "" {
		args = append(args, f.Reason)
		where += fmt.Sprintf(" AND reason = ?%d", len(args)+2)
	}
	page = `SELECT id, flow, seq, generation, lifetime_attempts, reason, ` + qEventError + ` FROM events
WHERE ` + where + ` AND (flow, seq) > (?1, ?2) ORDER BY flow, seq LIMIT ?` + strconv.Itoa(len(args)+3)
	count = `SELECT count(*) FROM events WHERE ` + strings.NewReplacer("?3", "?1", "?4", "?2").Replace(where)
	return page, count, args
}

const qQuarantinedReasons = `SELECT reason, count(*) FROM events WHERE state = 'quarantined'
GROUP BY reason ORDER BY count(*) DESC, reason`

// QuarantinedPage returns one page of quarantined events, read through the
// events_quarantined index (which holds only quarantined events), and the
// number that match in all. Bad input (a flow or reason that could never be
// stored, a cursor it did not hand out, a limit outside 1..MaxPageLimit) is
// ErrInvalid. Its pages together list what QuarantinedMatching returns.
func (s *Store) QuarantinedPage(ctx context.Context, q QuarantinedQuery) (QuarantinedPage, error) {
	n, after, err := q.Check()
	if err != nil {
		return QuarantinedPage{}, fmt.Errorf("quarantined page: %w", err)
	}
	afterFlow, afterSeq := after.Flow, after.Key
	page := QuarantinedPage{Events: []QuarantinedEvent{}}
	qPage, qCount, args := quarantinedPageQuery(q.Filter)
	err = s.withReadTx(ctx, func(tx *txn) error {
		if err := tx.QueryRowContext(ctx, qCount, args...).Scan(&page.Total); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, qPage, append(append([]any{afterFlow, afterSeq}, args...), n+1)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e QuarantinedEvent
			if err := rows.Scan(&e.EventID, &e.Flow, &e.Seq, &e.Generation, &e.LifetimeAttempts, &e.Reason, &e.Error); err != nil {
				return err
			}
			page.Events = append(page.Events, e)
		}
		return rows.Err()
	})
	if err != nil {
		return QuarantinedPage{}, fmt.Errorf("quarantined page: %w", err)
	}
	if len(page.Events) > n {
		page.Events = page.Events[:n]
		last := page.Events[n-1]
		page.Next = queue.Cursor{Key: last.Seq, Flow: last.Flow}.String()
	}
	return page, nil
}

// QuarantinedReasons counts the quarantined events by reason, the most
// common first (ties by reason). It reads only the quarantined events.
func (s *Store) QuarantinedReasons(ctx context.Context) ([]ReasonCount, error) {
	rows, err := s.db.QueryContext(ctx, qQuarantinedReasons)
	if err != nil {
		return nil, fmt.Errorf("quarantined reasons: %w", err)
	}
	defer rows.Close()
	out := []ReasonCount{}
	for rows.Next() {
		var r ReasonCount
		if err := rows.Scan(&r.Reason, &r.Count); err != nil {
			return nil, fmt.Errorf("quarantined reasons: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("quarantined reasons: %w", err)
	}
	return out, nil
}
