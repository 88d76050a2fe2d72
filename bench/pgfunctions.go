package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// pgFunctionsSQL creates, in a pgqueuestore's schema ({s}), a claim and
// an ack that each run on the server as one function call: the
// statements pgqueuestore's Claim and Settle send for this workload (the
// clock mark, the arrivals, the promotion, the MinServed pick with its
// head, the three claim updates; the event read with its flow and next
// event, the ack, its acked row and the head's move), in the same order,
// but planned once per connection and sent in one round trip with one
// commit. They do only what the workload of PGClaimSettle needs and raise
// an error for anything else (a time regression, arrivals, a head that is
// not pending and due, the rotation, destinations), so a measurement
// cannot silently take another path. No NOTIFY: the store sends one at
// most every 100 ms (pgqueuestore.DefaultNotifyInterval).
const pgFunctionsSQL = `
CREATE FUNCTION {s}.bench_claim(now bigint, OUT claimed_id text, OUT claimed_gen bigint) LANGUAGE plpgsql AS $$
DECLARE m record; h record;
BEGIN
  SELECT clock_mark, ticket, lease, fairness INTO m FROM {s}.meta WHERE id = 1 FOR UPDATE;
  IF now < m.clock_mark OR m.fairness <> 'min_served' THEN RAISE EXCEPTION 'bench_claim: not this workload'; END IF;
  IF now > m.clock_mark THEN UPDATE {s}.meta SET clock_mark = now WHERE id = 1; END IF;
  IF EXISTS (SELECT 1 FROM {s}.arrivals) OR EXISTS (SELECT 1 FROM {s}.flows WHERE dest <> '') THEN
    RAISE EXCEPTION 'bench_claim: not this workload';
  END IF;
  UPDATE {s}.flows SET ready = true WHERE NOT ready AND ready_at <= now AND paused IS NULL;
  SELECT f.flow, e.id, e.state, e.available_at, e.generation INTO h
    FROM {s}.flows AS f LEFT JOIN {s}.events AS e ON e.flow = f.flow AND e.seq = f.head_seq
    WHERE f.ready AND f.dest = '' ORDER BY f.served, f.flow LIMIT 1;
  IF NOT FOUND THEN RETURN; END IF;
  IF h.state IS DISTINCT FROM 'pending' OR h.available_at > now THEN RAISE EXCEPTION 'bench_claim: not this workload'; END IF;
  UPDATE {s}.events SET state = 'inflight', generation = generation + 1, attempts = attempts + 1,
    lifetime_attempts = lifetime_attempts + 1, lease_until = now + m.lease, ticket = m.ticket + 1 WHERE id = h.id;
  UPDATE {s}.flows SET served = served + 1, ready_at = now + m.lease, ready = false WHERE flow = h.flow;
  UPDATE {s}.meta SET ticket = m.ticket + 1 WHERE id = 1;
  claimed_id := h.id;
  claimed_gen := h.generation + 1;
END $$;
CREATE FUNCTION {s}.bench_ack(event_id text, gen bigint, now bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE m record; r record;
BEGIN
  SELECT clock_mark, fairness INTO m FROM {s}.meta WHERE id = 1 FOR UPDATE;
  IF now < m.clock_mark OR m.fairness <> 'min_served' THEN RAISE EXCEPTION 'bench_ack: not this workload'; END IF;
  IF now > m.clock_mark THEN UPDATE {s}.meta SET clock_mark = now WHERE id = 1; END IF;
  IF EXISTS (SELECT 1 FROM {s}.arrivals) THEN RAISE EXCEPTION 'bench_ack: not this workload'; END IF;
  SELECT e.flow, e.seq, e.state, e.generation, e.lease_until, f.last_seq, n.available_at, n.enqueued_at INTO r
    FROM {s}.events AS e LEFT JOIN {s}.flows AS f ON f.flow = e.flow
    LEFT JOIN {s}.events AS n ON n.flow = e.flow AND n.seq = e.seq + 1
    WHERE e.id = event_id;
  IF NOT FOUND THEN RAISE EXCEPTION 'bench_ack: no event %', event_id; END IF;
  IF r.generation <> gen OR r.state <> 'inflight' THEN RETURN 'stale'; END IF;
  IF now >= r.lease_until THEN RETURN 'expired'; END IF;
  UPDATE {s}.events SET state = 'acked', lease_until = 0, acked_at = now WHERE id = event_id;
  INSERT INTO {s}.acked (at, event_id) VALUES (now, event_id);
  IF r.seq < r.last_seq THEN
    UPDATE {s}.flows SET head_seq = r.seq + 1, ready_at = r.available_at,
      ready = r.available_at <= now AND paused IS NULL, head_enqueued_at = r.enqueued_at WHERE flow = r.flow;
  ELSE
    UPDATE {s}.flows SET head_seq = NULL, ready_at = NULL, ready = false, head_enqueued_at = NULL WHERE flow = r.flow;
  END IF;
  RETURN 'acked';
END $$;`

// PGFunctionClaimSettle is a control for PGClaimSettle: the same backlog in
// the same schema, each claim and each ack one call of a PL/pgSQL function
// (pgFunctionsSQL) on one connection, autocommitted: one round trip and
// one commit per transition, where pgqueuestore's Claim takes three round
// trips and its Settle two, each statement sent, planned and run on its
// own. It is not a store: it measures what the schema's writes allow when
// a transition runs on the server in one call
// (docs/decisions/postgres-server-side-transitions.md).
func PGFunctionClaimSettle(url string, flows, perFlow int) Case {
	return Case{
		Name: fmt.Sprintf("pg/claim+settle-functions/%d", flows),
		Unit: "events/s",
		Setup: func(ctx context.Context, dir string) (Workload, error) {
			return openPGFunctions(ctx, url, flows, perFlow)
		},
	}
}

// pgFunctions is PGFunctionClaimSettle's workload: the queue, loaded and
// analyzed as PGClaimSettle's, and the connection that calls its
// functions.
type pgFunctions struct {
	p          *pgQueue
	c          *pgx.Conn
	claim, ack string
}

// openPGFunctions opens a queue in a schema of its own, loads flows ×
// perFlow events, analyzes it and creates the functions.
func openPGFunctions(ctx context.Context, url string, flows, perFlow int) (_ *pgFunctions, err error) {
	p, err := openPGQueue(ctx, url)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if err := LoadBacklog(ctx, p, "e", flows, perFlow); err != nil {
		return nil, err
	}
	if err := analyzePG(ctx, url, p.schema); err != nil {
		return nil, err
	}
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	s := pgx.Identifier{p.schema}.Sanitize()
	if _, err := c.Exec(ctx, strings.ReplaceAll(pgFunctionsSQL, "{s}", s)); err != nil {
		c.Close(ctx)
		return nil, fmt.Errorf("create the control's functions: %w", err)
	}
	return &pgFunctions{p: p, c: c, claim: "SELECT claimed_id, claimed_gen FROM " + s + ".bench_claim($1)",
		ack: "SELECT " + s + ".bench_ack($1, $2, $3)"}, nil
}

// claimAck claims one head and acks it, one function call each.
func (f *pgFunctions) claimAck(ctx context.Context) (string, int64, error) {
	var (
		id  *string
		gen *int64
		o   string
	)
	if err := f.c.QueryRow(ctx, f.claim, int64(now)).Scan(&id, &gen); err != nil {
		return "", 0, fmt.Errorf("bench_claim: %w", err)
	}
	if id == nil {
		return "", 0, ErrBacklogEmpty
	}
	if err := f.c.QueryRow(ctx, f.ack, *id, *gen, int64(now)).Scan(&o); err != nil {
		return "", 0, fmt.Errorf("bench_ack %s: %w", *id, err)
	}
	if o != "acked" {
		return "", 0, fmt.Errorf("bench_ack %s: %s, want acked", *id, o)
	}
	return *id, *gen, nil
}

// Step claims one head and acks it.
func (f *pgFunctions) Step(ctx context.Context) (int, error) {
	if _, _, err := f.claimAck(ctx); err != nil {
		return 0, err
	}
	return 1, nil
}

// Close closes the connection and the queue, and drops its schema.
func (f *pgFunctions) Close() error {
	return errors.Join(f.c.Close(context.Background()), f.p.Close())
}
