package pgqueuestore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
	"github.com/jackc/pgx/v5"
)

// Paged reads for an operator's console (queue.Pager), as queuestore's
// page.go has them: a page by name is one range of the primary key (keyset
// paging), the same cost on the first page of 100,000 flows as on the last;
// a page in another order reads the flows and keeps the first Limit+1 (a
// bounded sort), so that no claim or settle pays for an operator's order
// (docs/decisions/operator-reads-off-the-claim-path.md). The cursors,
// orders and tie-breaks are queuestore's; page_plan_test.go shows the
// plans.

// sortKeys are the key expressions of the orders other than by name. The
// values are queuestore's sort keys, so the cursors' text forms are the
// same on both backends. No index holds them (migration 10 dropped those
// of migration 5; the backlog order never had one, see
// docs/decisions/postgres-paged-reads.md).
var sortKeys = map[queue.FlowSort]string{
	// -backlog: a flow's backlog is last_seq - head_seq + 1 (events after
	// the head are never claimed, so all of them wait).
	queue.SortByBacklog: `(CASE WHEN f.head_seq IS NULL THEN 0 ELSE f.head_seq - f.last_seq - 1 END)`,
	queue.SortByServed:  `(-f.served)`,
	queue.SortByBlocked: `(CASE WHEN f.head_seq IS NULL THEN 3 WHEN f.ready_at IS NULL THEN 0 WHEN NOT f.ready THEN 1 ELSE 2 END)`,
}

// maxRun is a string above every valid UTF-8 string of up to
// queue.MaxNameLen bytes: the largest code point, U+10FFFF (F4 8F BF BF,
// above every valid encoding in byte order), repeated past that length.
var maxRun = strings.Repeat("\U0010FFFF", queue.MaxNameLen/4+1)

// prefixRange returns the range [lo, hi) of flow names (byte order, COLLATE
// "C") that start with the bytes of p, in valid UTF-8 that the server
// accepts as text; ok is false when no flow name can start with p (a NUL,
// bytes no valid UTF-8 string starts with). queuestore compares p's bytes
// with SQLite, which takes any bytes; the server refuses text that is not
// valid UTF-8, so a p that ends inside a character's encoding is widened
// here to the characters whose encodings start with those bytes, which
// is the same set of names.
func prefixRange(p string) (lo, hi string, ok bool) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", "", false
	}
	v, t := p, ""
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRuneInString(p[i:])
		if r == utf8.RuneError && size <= 1 {
			v, t = p[:i], p[i:]
			break
		}
		i += size
	}
	if t == "" {
		return v, v + maxRun, true
	}
	// t must be the start of one character's encoding (at most 3 bytes of a
	// 2- to 4-byte encoding); the characters it starts are a range of code
	// points, in byte order as in code point order, found by walking the
	// code points (at most about a million, only for such a prefix).
	if utf8.FullRuneInString(t) {
		return "", "", false
	}
	first, last := rune(-1), rune(-1)
	var buf [utf8.UTFMax]byte
	for r := rune(0x80); r <= utf8.MaxRune; r++ {
		n := utf8.EncodeRune(buf[:], r)
		if n > len(t) && string(buf[:len(t)]) == t {
			if first < 0 {
				first = r
			}
			last = r
		} else if first >= 0 {
			break
		}
	}
	if first < 0 {
		return "", "", false
	}
	return v + string(first), v + string(last) + maxRun, true
}

const qFlowCols = `f.flow, f.served, f.last_seq, coalesce(f.head_seq, 0), coalesce(e.state, ''), f.ready_at,
    CASE WHEN f.head_seq IS NULL THEN 0 ELSE f.last_seq - f.head_seq + 1 END, f.weight, coalesce(f.paused, ''), f.dest`

// flowsPageQuery builds the statement of one page of flows: forward
// (ascending from a cursor) or backward (descending to a cursor, reversed
// by the caller), and its arguments. By name the cursor is a range of the
// primary key. By a key the cursor is one row comparison, (key, flow) >
// ($1, $2), and the inner statement reads the flows (those of the prefix's
// range of names with a prefix) and keeps the first rows of them in (key,
// name) order; only those are joined to their heads' events. The prefix is
// a range of names, [lo, hi).
func flowsPageQuery(key string, cur *queue.Cursor, backward bool, prefix []string, rows int) (string, []any) {
	op, dir := ">", ""
	if backward {
		op, dir = "<", " DESC"
	}
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if cur != nil {
		if key == "" {
			where = append(where, "f.flow "+op+" "+arg(cur.Flow))
		} else {
			where = append(where, "("+key+", f.flow) "+op+" ("+arg(cur.Key)+"::bigint, "+arg(cur.Flow)+")")
		}
	}
	if prefix != nil {
		where = append(where, "f.flow >= "+arg(prefix[0]), "f.flow < "+arg(prefix[1]))
	}
	cond := ""
	if len(where) > 0 {
		cond = "\nWHERE " + strings.Join(where, " AND ")
	}
	const head = `
LEFT JOIN {s}.events e ON e.flow = f.flow AND e.seq = f.head_seq`
	if key == "" {
		return "SELECT " + qFlowCols + ", 0::bigint\nFROM {s}.flows f" + head + cond +
			"\nORDER BY f.flow" + dir + "\nLIMIT " + arg(rows), args
	}
	return "SELECT " + qFlowCols + ", f.k\nFROM (SELECT f.*, " + key + " AS k FROM {s}.flows f" + cond +
		"\n    ORDER BY k" + dir + ", f.flow" + dir + " LIMIT " + arg(rows) + ") f" + head +
		"\nORDER BY f.k" + dir + ", f.flow" + dir, args
}

// FlowsPage returns one page of flows in the query's order. By name it
// seeks to its cursor and reads Limit+1 entries of the primary key,
// whatever its position (TestPlans_PagedReads); in another order it reads
// the flows (those of the Prefix when it has one) and keeps the first
// Limit+1 past its cursor. Bad input (unknown sort, limit outside
// 1..MaxPageLimit, a cursor it did not hand out, more than one of
// After/Before/Last) is queue.ErrInvalid.
func (s *Store) FlowsPage(ctx context.Context, q queue.FlowQuery) (queue.FlowPage, error) {
	n, cur, err := q.Check()
	if err != nil {
		return queue.FlowPage{}, fmt.Errorf("flows page: %w", err)
	}
	var curp *queue.Cursor
	if q.After != "" || q.Before != "" {
		curp = &cur
	}
	backward := q.Before != "" || q.Last
	var prefix []string
	match := true
	if q.Prefix != "" {
		lo, hi, ok := prefixRange(q.Prefix)
		prefix, match = []string{lo, hi}, ok
	}
	stmt, args := flowsPageQuery(sortKeys[q.Sort], curp, backward, prefix, n+1)
	var page queue.FlowPage
	var keys []int64
	if err := s.promoteWaiting(ctx); err != nil {
		return queue.FlowPage{}, fmt.Errorf("flows page: %w", err)
	}
	err = s.withReadTx(ctx, func(tx pgx.Tx) error {
		var mark int64
		if err := tx.QueryRow(ctx, s.q(qClockMark)).Scan(&mark); err != nil {
			return err
		}
		page.Mark = clock.Tick(mark)
		if !match {
			return nil
		}
		rows, _ := tx.Query(ctx, s.q(stmt), args...)
		var f queue.FlowState
		var readyAt *int64
		var k int64
		_, err := pgx.ForEachRow(rows, []any{&f.Flow, &f.Served, &f.LastSeq, &f.HeadSeq, &f.HeadState, &readyAt, &f.Backlog, &f.Weight, &f.PauseReason, &f.Destination, &k}, func() error {
			c := f
			c.Paused = c.PauseReason != ""
			c.ReadyAt = nil
			if readyAt != nil {
				t := clock.Tick(*readyAt)
				c.ReadyAt = &t
			}
			page.Flows = append(page.Flows, c)
			keys = append(keys, k)
			return nil
		})
		return err
	})
	if err != nil {
		return queue.FlowPage{}, fmt.Errorf("flows page: %w", err)
	}
	page.Finish(q, n, page.Flows, keys)
	return page, nil
}

const qClockMark = `SELECT clock_mark FROM {s}.meta WHERE id = 1`

// ClockMark returns the store's clock mark, the highest tick it has
// recorded, and nothing else: one row read (Stats also counts every event
// by state).
func (s *Store) ClockMark(ctx context.Context) (clock.Tick, error) {
	var mark int64
	if err := s.pool.QueryRow(ctx, s.q(qClockMark)).Scan(&mark); err != nil {
		return 0, fmt.Errorf("clock mark: %w", err)
	}
	return clock.Tick(mark), nil
}

const (
	qAuditPage = `SELECT id, kind, event_id, generation, reason, detail, at FROM {s}.audit
WHERE id < $1 ORDER BY id DESC LIMIT $2`
	qAuditPageEvent = `SELECT id, kind, event_id, generation, reason, detail, at FROM {s}.audit
WHERE event_id = $3 AND id < $1 ORDER BY id DESC LIMIT $2`
)

// AuditPage returns one page of the audit, newest first, read through the
// audit's primary key (or the audit_event index of migration 5 for one
// event). Bad input (a negative Before, a limit outside 1..MaxPageLimit, an
// event ID that could never be stored) is queue.ErrInvalid.
func (s *Store) AuditPage(ctx context.Context, q queue.AuditQuery) (queue.AuditPage, error) {
	n, before, err := q.Check()
	if err != nil {
		return queue.AuditPage{}, fmt.Errorf("audit page: %w", err)
	}
	stmt, args := qAuditPage, []any{before, n + 1}
	if q.EventID != "" {
		stmt, args = qAuditPageEvent, append(args, q.EventID)
	}
	es, err := s.readAuditRecords(ctx, s.pool, stmt, args...)
	if err != nil {
		return queue.AuditPage{}, fmt.Errorf("audit page: %w", err)
	}
	page := queue.AuditPage{Entries: es}
	if len(page.Entries) > n {
		page.Entries = page.Entries[:n]
		page.Next = page.Entries[n-1].ID
	}
	return page, nil
}

// quarantinedPageQuery is the statement of one page of quarantined events
// matching f after the cursor ($1 flow, $2 seq; at most $3 rows), and the
// count of all that match, with the filter's arguments after those. Each
// reads events_quarantined, or events_quarantined_reason when f has a
// reason: the cursor is a row comparison the index seeks to.
func quarantinedPageQuery(f queue.RedriveFilter) (page, count string, args []any) {
	where := "quarantined"
	if f.Flow != "" {
		args = append(args, f.Flow)
		where += " AND flow = $" + strconv.Itoa(len(args)+3)
	}
	if f.Reason != "" {
		args = append(args, f.Reason)
		where += " AND reason = $" + strconv.Itoa(len(args)+3)
	}
	page = `SELECT id, flow, seq, generation, lifetime_attempts, reason, ` + qErrorCol + ` FROM {s}.events
WHERE ` + where + ` AND (flow, seq) > ($1, $2) ORDER BY flow, seq LIMIT $3`
	count = `SELECT count(*) FROM {s}.events WHERE ` + strings.NewReplacer("$4", "$1", "$5", "$2").Replace(where)
	return page, count, args
}

const qQuarantinedReasons = `SELECT reason, count(*) FROM {s}.events WHERE quarantined
GROUP BY reason ORDER BY count(*) DESC, reason`

// QuarantinedPage returns one page of quarantined events, read through the
// quarantine indexes (which hold only quarantined events), each with the
// error text of the failure that quarantined it, and the number
// that match in all, in one read transaction. Bad input (a flow or reason
// that could never be stored, a cursor it did not hand out, a limit outside
// 1..MaxPageLimit) is queue.ErrInvalid. Its pages together list what
// QuarantinedMatching returns.
func (s *Store) QuarantinedPage(ctx context.Context, q queue.QuarantinedQuery) (queue.QuarantinedPage, error) {
	n, after, err := q.Check()
	if err != nil {
		return queue.QuarantinedPage{}, fmt.Errorf("quarantined page: %w", err)
	}
	page := queue.QuarantinedPage{Events: []queue.QuarantinedEvent{}}
	qPage, qCount, args := quarantinedPageQuery(q.Filter)
	err = s.withReadTx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, s.q(qCount), args...).Scan(&page.Total); err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, s.q(qPage), append([]any{after.Flow, after.Key, n + 1}, args...)...)
		var e queue.QuarantinedEvent
		_, err := pgx.ForEachRow(rows, []any{&e.EventID, &e.Flow, &e.Seq, &e.Generation, &e.LifetimeAttempts, &e.Reason, &e.Error}, func() error {
			page.Events = append(page.Events, e)
			return nil
		})
		return err
	})
	if err != nil {
		return queue.QuarantinedPage{}, fmt.Errorf("quarantined page: %w", err)
	}
	if len(page.Events) > n {
		page.Events = page.Events[:n]
		last := page.Events[n-1]
		page.Next = queue.Cursor{Key: last.Seq, Flow: last.Flow}.String()
	}
	return page, nil
}

// QuarantinedReasons counts the quarantined events by reason, the most
// common first (ties by reason in byte order). It reads only the quarantined
// events (events_quarantined_reason).
func (s *Store) QuarantinedReasons(ctx context.Context) ([]queue.ReasonCount, error) {
	rows, _ := s.pool.Query(ctx, s.q(qQuarantinedReasons))
	out := []queue.ReasonCount{}
	var r queue.ReasonCount
	if _, err := pgx.ForEachRow(rows, []any{&r.Reason, &r.Count}, func() error {
		out = append(out, r)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("quarantined reasons: %w", err)
	}
	return out, nil
}
