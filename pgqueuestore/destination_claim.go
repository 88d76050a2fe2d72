package pgqueuestore

import (
	"slices"
	"strconv"

	"github.com/fairrelay/fairrelay/clock"
	"github.com/fairrelay/fairrelay/queue"
)

// The claim's pick with destinations (docs/contract.md §7.11;
// docs/decisions/postgres-destinations.md). A store without destinations
// picks from flows_ready's (or flows_rotation's) '' range alone
// (pickDefault: the plan of a queue before destinations), and the same
// statement tells, by a sentinel row, whether a destination was
// registered since; from then on (destinations are never removed) the
// store picks with pickMerged: one range of the index per destination
// that has room, merged in the order's key.

const (
	// qDefaultSentinel is the row pickDefault adds when the store has a
	// destination: flow '' (no flow is named so), its other columns in
	// qPickHeads's types. The destinations table is read for its first
	// row only.
	qDefaultSentinel = `SELECT ''::text, NULL::bigint, NULL::text, NULL::text, NULL::integer, NULL::bigint, NULL::bigint,
    NULL::bytea, NULL::bigint, 0::bigint, 0::bigint, 0::integer, ''::text FROM {s}.destinations LIMIT 1`

	// qRoom is each destination's room for this claim (the CTE r of
	// qPickMerged): the default destination ('', no limits of its own) and
	// every registered one that is not paused, less those the caller
	// excludes ($5); room = the least of the caller's cap ($3, $4, less
	// this call's claims), the concurrency limit less its unexpired leases
	// (counted on events_inflight_dest, at most the limit: LIMIT), the
	// whole tokens of its rate bucket refilled to now ($1), and the
	// page's size ($2).
	qRoom = `d AS (
    SELECT x.name, x.concurrency, x.rate, x.tokens, x.refilled_at FROM {s}.destinations AS x WHERE x.paused IS NULL
    UNION ALL SELECT ''::text, 0, 0, 0::bigint, 0::bigint
), r AS MATERIALIZED (
    SELECT d.name, greatest(0, least(coalesce(c.room, $2::bigint), $2::bigint,
        CASE WHEN d.concurrency > 0 THEN d.concurrency - (SELECT count(*) FROM (SELECT 1 FROM {s}.events AS i
            WHERE i.inflight_dest = d.name AND i.inflight_lease > $1::bigint LIMIT d.concurrency) AS l)
        ELSE $2::bigint END,
        CASE WHEN d.rate > 0 THEN least(d.rate::bigint * 1000, d.tokens + least($1::bigint - d.refilled_at, 1000) * d.rate) / 1000
        ELSE $2::bigint END)) AS room
    FROM d LEFT JOIN unnest($3::text[], $4::bigint[]) AS c(name, room) ON c.name = d.name
    WHERE d.name <> ALL($5::text[])
)`

	// qPickMerged is the first $2 ready flows in MinServed order among
	// the destinations with room, at most room of each, with their heads
	// (the columns of qPickHeads). It reads, per destination with room,
	// the first entry of its range of flows_ready (dest, served, flow)
	// (h); the $2-th smallest of those heads (b; a key above every flow
	// when there are fewer) bounds the answer, since $2 flows that may be
	// picked lie at or below it; then only the destinations whose head is
	// at or below b read their range, up to b and at most room entries
	// each, merged by a top-$2 sort. A batch of n over D destinations
	// reads about D + n index entries, not D * n. r and h are MATERIALIZED
	// so that each room and head is computed once.
	qPickMerged = `WITH ` + qRoom + `, h AS MATERIALIZED (
    SELECT r.name, r.room, k.served, k.flow FROM r CROSS JOIN LATERAL (
        SELECT f.served, f.flow FROM {s}.flows AS f
        WHERE f.ready AND f.dest = r.name ORDER BY f.served, f.flow LIMIT 1) AS k
    WHERE r.room > 0
), b AS (
    SELECT x.served, x.flow FROM (
        (SELECT h.served, h.flow FROM h ORDER BY h.served, h.flow OFFSET $2::bigint - 1 LIMIT 1)
        UNION ALL SELECT 9223372036854775807, ''::text) AS x
    ORDER BY x.served, x.flow LIMIT 1
), p AS (
    SELECT k.* FROM h CROSS JOIN b CROSS JOIN LATERAL (
        SELECT f.flow, f.head_seq, f.pass, f.served, f.weight, f.dest FROM {s}.flows AS f
        WHERE f.ready AND f.dest = h.name AND (f.served, f.flow) <= (b.served, b.flow)
        ORDER BY f.served, f.flow LIMIT h.room) AS k
    WHERE (h.served, h.flow) <= (b.served, b.flow)
    ORDER BY k.served, k.flow LIMIT $2)
SELECT p.flow, p.head_seq, e.id, e.state, e.attempts, e.lease_until, e.available_at,
    e.body, e.generation, p.pass, p.served, p.weight, p.dest
FROM p LEFT JOIN {s}.events AS e ON e.flow = p.flow AND e.seq = p.head_seq
ORDER BY p.served, p.flow`

	// qRotPickMerged is qPickMerged in the rotation's order (pass,
	// joined), on flows_rotation (dest, pass, joined).
	qRotPickMerged = `WITH ` + qRoom + `, h AS MATERIALIZED (
    SELECT r.name, r.room, k.pass, k.joined FROM r CROSS JOIN LATERAL (
        SELECT f.pass, f.joined FROM {s}.flows AS f
        WHERE f.ready AND f.joined > 0 AND f.dest = r.name ORDER BY f.pass, f.joined LIMIT 1) AS k
    WHERE r.room > 0
), b AS (
    SELECT x.pass, x.joined FROM (
        (SELECT h.pass, h.joined FROM h ORDER BY h.pass, h.joined OFFSET $2::bigint - 1 LIMIT 1)
        UNION ALL SELECT 9223372036854775807, 9223372036854775807) AS x
    ORDER BY x.pass, x.joined LIMIT 1
), p AS (
    SELECT k.* FROM h CROSS JOIN b CROSS JOIN LATERAL (
        SELECT f.flow, f.head_seq, f.pass, f.joined, f.served, f.weight, f.dest FROM {s}.flows AS f
        WHERE f.ready AND f.joined > 0 AND f.dest = h.name AND (f.pass, f.joined) <= (b.pass, b.joined)
        ORDER BY f.pass, f.joined LIMIT h.room) AS k
    WHERE (h.pass, h.joined) <= (b.pass, b.joined)
    ORDER BY k.pass, k.joined, k.flow LIMIT $2)
SELECT p.flow, p.head_seq, e.id, e.state, e.attempts, e.lease_until, e.available_at,
    e.body, e.generation, p.pass, p.served, p.weight, p.dest
FROM p LEFT JOIN {s}.events AS e ON e.flow = p.flow AND e.seq = p.head_seq
ORDER BY p.pass, p.joined, p.flow`

	// qClaimEventsDest is qClaimEvents that also records each event's
	// destination ($4, '' for the default one), which
	// events_inflight_dest counts while the lease runs.
	qClaimEventsDest = `UPDATE {s}.events AS e SET state = 'inflight', generation = e.generation + 1,
    attempts = e.attempts + 1, lifetime_attempts = e.lifetime_attempts + 1,
    lease_until = $2, ticket = $3 + u.k - 1, dest = u.dest
FROM unnest($1::text[], $4::text[]) WITH ORDINALITY AS u(id, dest, k)
WHERE e.id = u.id`

	// qSpendTokens takes $2[k] tokens (1000 milli-tokens each) from the
	// bucket of destination $1[k], refilled to $3 first, for the ones with
	// a rate limit.
	qSpendTokens = `UPDATE {s}.destinations AS d
SET tokens = least(d.rate::bigint * 1000, d.tokens + least($3::bigint - d.refilled_at, 1000) * d.rate) - 1000 * u.k,
    refilled_at = $3
FROM unnest($1::text[], $2::bigint[]) AS u(name, k)
WHERE d.name = u.name AND d.rate > 0`
)

// pickDefault is the pick of a store without destinations: the first
// limit ready flows of the default destination in the order (the plan of
// a queue before destinations), and the sentinel row when a destination
// exists.
func (s *Store) pickDefault(rot bool, limit int) string {
	pick := qPickHeads
	if rot {
		pick = qRotPickHeads
	}
	return s.q("(" + pick + " LIMIT " + strconv.Itoa(limit) + ")\nUNION ALL (" + qDefaultSentinel + ")")
}

// pickMerged is the pick of a store with destinations and its arguments:
// at most limit flows, f's exclusions and caps, less this call's claims
// so far (used).
func (s *Store) pickMerged(rot bool, now clock.Tick, limit int, f queue.ClaimFilter, used map[string]int) (string, []any) {
	names := make([]string, 0, len(f.Room))
	for d := range f.Room {
		names = append(names, d)
	}
	slices.Sort(names)
	rooms := make([]int64, len(names))
	for k, d := range names {
		rooms[k] = int64(max(f.Room[d]-used[d], 0))
	}
	exclude := f.Exclude
	if exclude == nil {
		exclude = []string{}
	}
	q := qPickMerged
	if rot {
		q = qRotPickMerged
	}
	return s.q(q), []any{int64(now), int64(limit), names, rooms, exclude}
}

// defaultRoom is how many heads of the default destination a page of at
// most limit may take under f, after this call's claims (used).
func defaultRoom(f queue.ClaimFilter, used map[string]int, limit int) int {
	if slices.Contains(f.Exclude, queue.DefaultDestination) {
		return 0
	}
	if r, ok := f.Room[queue.DefaultDestination]; ok {
		return max(min(limit, r-used[queue.DefaultDestination]), 0)
	}
	return limit
}

// pageCount counts d in dests.
func pageCount(dests []string, d string) int {
	n := 0
	for _, x := range dests {
		if x == d {
			n++
		}
	}
	return n
}
