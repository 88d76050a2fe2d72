package queue

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fairrelay/fairrelay/clock"
)

// Paged reads for an operator's console ([Pager]), keyset paging: a page of
// flows by name, of the audit or of quarantined events is one index range
// read, the same cost on the first page of 100,000 flows as on the last; a
// page of flows by backlog, served or blocked reads the flows once and
// keeps the page's rows (a bounded sort), since an index in those orders
// would cost every enqueue, claim and ack. No page reads every event or
// every audit row. The queries and pages are the same on every backend;
// each backend's plan tests show the plans.

// FlowSort is an order of FlowsPage. Every order breaks ties by flow name.
type FlowSort string

// The orders of FlowsPage.
const (
	// SortByFlow orders flows by name (byte order).
	SortByFlow FlowSort = "flow"
	// SortByBacklog puts the largest backlog (events not acked) first.
	SortByBacklog FlowSort = "backlog"
	// SortByServed puts the most served flow first.
	SortByServed FlowSort = "served"
	// SortByBlocked puts flows whose head is quarantined first, then flows
	// whose head waits for a tick (in flight, or pending with a backoff or
	// not yet promoted), then flows with a ready head, then flows with
	// nothing left to deliver.
	SortByBlocked FlowSort = "blocked"
)

// DefaultPageLimit is the page size when a query leaves Limit at 0;
// CheckPageLimit refuses a page size outside 1..MaxPageLimit with
// ErrInvalid.
func CheckPageLimit(limit int) error {
	if limit < 1 || limit > MaxPageLimit {
		return fmt.Errorf("%w: limit %d is outside 1..%d", ErrInvalid, limit, MaxPageLimit)
	}
	return nil
}

// MaxPageLimit is the largest page a query may ask for.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 1000
)

// FlowQuery asks FlowsPage for one page of flows.
type FlowQuery struct {
	// Prefix keeps the flows whose name starts with Prefix (a prefix of
	// bytes, case-sensitive; it is not a substring search). "" keeps all.
	Prefix string
	// Sort is the order; "" means SortByFlow.
	Sort FlowSort
	// After is the Next of the page before: the page starts after it.
	// Before is the Prev of the page after: the page ends before it. At most
	// one of them is set; neither gives the first page, or with Last the
	// last page.
	After, Before string
	// Last asks for the last page (After and Before must be empty).
	Last bool
	// Limit is the page size, 1..MaxPageLimit; 0 means DefaultPageLimit.
	Limit int
}

// FlowPage is one page of flows. Prev and Next are opaque cursors for the
// neighbouring pages (FlowQuery.Before and FlowQuery.After); "" when there
// is none. They are valid for the query's Sort and Prefix only.
type FlowPage struct {
	Flows      []FlowState `json:"flows"`
	Prev, Next string
	// Mark is the clock mark as of the page's read (the same transaction),
	// the tick against which a head's ReadyAt tells whether it blocks.
	Mark clock.Tick `json:"mark"`
	// Keys[i] is Flows[i]'s key in the page's order, the one its cursor
	// carries (0 in the order by name): the store's own, which for
	// SortByBlocked reads the head's cached readiness, so a page of
	// several stores (shard) merges by (key, flow) without recomputing it.
	Keys []int64 `json:"-"`
}

// Check checks q: a known Sort, a limit within 1..MaxPageLimit, a prefix
// that could be part of a flow name, at most one of After, Before and Last,
// and a cursor of the form a page hands out. It returns the page size (the
// limit, or DefaultPageLimit) and the cursor (zero without one). An error
// wraps ErrInvalid.
func (q FlowQuery) Check() (limit int, cur Cursor, err error) {
	switch q.Sort {
	case "", SortByFlow, SortByBacklog, SortByServed, SortByBlocked:
	default:
		return 0, Cursor{}, fmt.Errorf("%w: sort %q is not one of flow, backlog, served, blocked", ErrInvalid, q.Sort)
	}
	if limit, err = checkLimit(q.Limit); err != nil {
		return 0, Cursor{}, err
	}
	if len(q.Prefix) > MaxNameLen {
		return 0, Cursor{}, fmt.Errorf("%w: prefix is %d bytes, more than %d", ErrInvalid, len(q.Prefix), MaxNameLen)
	}
	set := 0
	for _, b := range []bool{q.After != "", q.Before != "", q.Last} {
		if b {
			set++
		}
	}
	if set > 1 {
		return 0, Cursor{}, fmt.Errorf("%w: give at most one of After, Before and Last", ErrInvalid)
	}
	if c := q.After + q.Before; c != "" {
		if cur, err = ParseCursor(c); err != nil {
			return 0, Cursor{}, err
		}
	}
	return limit, cur, nil
}

// checkLimit returns a page size: limit, or DefaultPageLimit for 0.
func checkLimit(limit int) (int, error) {
	if limit == 0 {
		return DefaultPageLimit, nil
	}
	if err := CheckPageLimit(limit); err != nil {
		return 0, err
	}
	return limit, nil
}

// Cursor is a position in a paged order: a key (the sort key's value in a
// flow order, the sequence number in the quarantined order) and a flow
// name. Its text form, "KEY:FLOW", is what pages hand out as Prev and Next.
type Cursor struct {
	Key  int64
	Flow string
}

// String is the cursor's text form.
func (c Cursor) String() string { return strconv.FormatInt(c.Key, 10) + ":" + c.Flow }

// ParseCursor reads a cursor's text form; anything a page could not have
// handed out is ErrInvalid.
func ParseCursor(s string) (Cursor, error) {
	k, flow, ok := strings.Cut(s, ":")
	n, err := strconv.ParseInt(k, 10, 64)
	if !ok || err != nil || CheckText("cursor flow", flow, MaxNameLen) != nil {
		return Cursor{}, fmt.Errorf("%w: page cursor %q is not one a page handed out", ErrInvalid, s)
	}
	return Cursor{Key: n, Flow: flow}, nil
}

// AuditQuery asks AuditPage for one page of audit rows (of every kind),
// newest first.
type AuditQuery struct {
	// EventID keeps the redrive rows of one event; "" keeps all rows.
	EventID string
	// Before keeps rows whose ID is below it (the Next of the page before);
	// 0 starts at the newest row.
	Before int64
	// Limit is the page size, 1..MaxPageLimit; 0 means DefaultPageLimit.
	Limit int
}

// Check checks q (a limit within 1..MaxPageLimit, Before not negative, an
// event ID that could be stored) and returns the page size and the row ID
// the page starts below (math.MaxInt64 for the newest). An error wraps
// ErrInvalid.
func (q AuditQuery) Check() (limit int, before int64, err error) {
	if limit, err = checkLimit(q.Limit); err != nil {
		return 0, 0, err
	}
	if q.Before < 0 {
		return 0, 0, fmt.Errorf("%w: before %d is negative", ErrInvalid, q.Before)
	}
	if q.EventID != "" {
		if err := CheckID(q.EventID); err != nil {
			return 0, 0, err
		}
	}
	before = q.Before
	if before == 0 {
		before = 1<<63 - 1
	}
	return limit, before, nil
}

// AuditPage is one page of audit rows, newest first. Next is the Before of
// the next (older) page; 0 when there is none.
type AuditPage struct {
	Entries []AuditRecord `json:"entries"`
	Next    int64         `json:"next"`
}

// QuarantinedQuery asks QuarantinedPage for one page of quarantined events
// in flow and sequence order.
type QuarantinedQuery struct {
	// Filter keeps the events RedriveAll with the same filter would
	// redrive (exact flow, exact reason; "" matches all).
	Filter RedriveFilter
	// After is the Next of the page before; "" starts at the first event.
	After string
	// Limit is the page size, 1..MaxPageLimit; 0 means DefaultPageLimit.
	Limit int
}

// Check checks q (a limit within 1..MaxPageLimit, a valid filter, a cursor
// a page handed out) and returns the page size and the position the page
// starts after (the zero Cursor for the first page). An error wraps
// ErrInvalid.
func (q QuarantinedQuery) Check() (limit int, after Cursor, err error) {
	if limit, err = checkLimit(q.Limit); err != nil {
		return 0, Cursor{}, err
	}
	if err := q.Filter.Validate(); err != nil {
		return 0, Cursor{}, err
	}
	if q.After != "" {
		if after, err = ParseCursor(q.After); err != nil {
			return 0, Cursor{}, err
		}
	}
	return limit, after, nil
}

// QuarantinedPage is one page of quarantined events. Next is the After of
// the next page ("" when none); Total counts every event that matches the
// query's Filter, on every page.
type QuarantinedPage struct {
	Events []QuarantinedEvent `json:"events"`
	Next   string             `json:"next"`
	Total  int64              `json:"total"`
}

// ReasonCount is how many quarantined events carry one reason.
type ReasonCount struct {
	Reason string `json:"reason"`
	Count  int64  `json:"count"`
}

// Finish makes the page a backend read for q: rows are the flows it read
// (at most limit+1, in the order read: ascending, or descending for a page
// read backwards, Before or Last) and keys their sort keys (any value when
// sorting by name). It keeps limit flows in the page's order and sets Prev
// and Next: the cursors of its first and last flow, where a page lies
// before or after it.
func (p *FlowPage) Finish(q FlowQuery, limit int, rows []FlowState, keys []int64) {
	backward := q.Before != "" || q.Last
	more := len(rows) > limit
	if more {
		rows, keys = rows[:limit], keys[:limit]
	}
	if backward {
		slices.Reverse(rows)
		slices.Reverse(keys)
	}
	p.Flows, p.Keys = rows, keys
	if len(rows) == 0 {
		return
	}
	first := Cursor{Key: keys[0], Flow: rows[0].Flow}.String()
	last := Cursor{Key: keys[len(keys)-1], Flow: rows[len(rows)-1].Flow}.String()
	if backward {
		// Read towards the start: more rows before; a page after exists
		// when it was asked for with Before.
		if more {
			p.Prev = first
		}
		if q.Before != "" {
			p.Next = last
		}
		return
	}
	if more {
		p.Next = last
	}
	if q.After != "" {
		p.Prev = first
	}
}
