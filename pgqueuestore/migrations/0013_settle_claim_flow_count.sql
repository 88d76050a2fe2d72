-- pgqueuestore migration 13: settle_claim finds two items of one flow in
-- its read (docs/decisions/postgres-server-side-transitions.md). Migration
-- 11's loop looked for each item's flow among the flows of the items
-- before it, an array search per item: quadratic in the batch, 1 s of a
-- SettleBatch of 10,000 acks spent inside the write turn. The read now
-- counts each flow's items (a window over the batch, sorted once), and an
-- item whose flow has another takes the general path, as before. The rest
-- of the function is migration 11's, unchanged.
CREATE OR REPLACE FUNCTION {s}.settle_claim(ids text[], gens bigint[], tick bigint, n integer, wake text,
    OUT o_k integer, OUT o_outcome text, OUT o_id text, OUT o_flow text, OUT o_seq bigint,
    OUT o_body bytea, OUT o_generation bigint, OUT o_attempts integer, OUT o_ticket bigint,
    OUT o_lease_until bigint, OUT o_woke boolean)
RETURNS SETOF record
LANGUAGE plpgsql
-- The schema's tables, named without it in the body: a schema's name may
-- hold anything, even the body's quote. pg_temp last, so that no
-- temporary table of the session stands in for one of them.
SET search_path = {s}, pg_temp
-- The plans of the store's write transactions (store.go, qKeyPlans).
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET jit = off
SET max_parallel_workers_per_gather = 0
AS $$
DECLARE
    m record;
    e record;
    h record;
    v_outcomes text[] := '{}';
    v_acked text[] := '{}';
    v_flows text[] := '{}';
    v_heads bigint[] := '{}';
    v_ats bigint[] := '{}';
    v_enqs bigint[] := '{}';
    v_woke boolean := false;
    v_ticket bigint;
    v_lease bigint;
    v_events text[] := '{}';
    v_served text[] := '{}';
BEGIN
    SELECT mt.clock_mark, mt.ticket, mt.lease, mt.max_attempts, mt.fairness,
        greatest(mt.lease, mt.backoff_cap, mt.retry_after_cap) < 4611686018427387904
            AND 4611686018427387904 > ALL (mt.schedule) AS short
        INTO m FROM meta AS mt WHERE mt.id = 1 FOR UPDATE;
    -- The detail of these two tells the store to skip this call while
    -- they last (onecall.go).
    IF m.fairness <> 'min_served' THEN
        RAISE EXCEPTION 'settle_claim: the general path' USING ERRCODE = 'FR001', DETAIL = 'rotation';
    END IF;
    IF EXISTS (SELECT 1 FROM destinations) THEN
        RAISE EXCEPTION 'settle_claim: the general path' USING ERRCODE = 'FR001', DETAIL = 'destinations';
    END IF;
    IF tick < m.clock_mark OR tick >= 4611686018427387904 OR NOT m.short OR EXISTS (SELECT 1 FROM arrivals) THEN
        RAISE EXCEPTION 'settle_claim: the general path' USING ERRCODE = 'FR001';
    END IF;
    IF tick > m.clock_mark THEN
        UPDATE meta SET clock_mark = tick WHERE id = 1;
    END IF;
    -- The acks: one read of every item's event, its flow's last seq and
    -- its next event; the checks here; then one statement per table.
    FOR e IN SELECT u.k, u.id, u.gen, ev.flow, ev.seq, ev.state, ev.generation, ev.lease_until,
            f.last_seq, nx.id AS next_id, nx.available_at AS next_at, nx.enqueued_at AS next_enqueued,
            count(*) OVER (PARTITION BY ev.flow) AS of_flow
        FROM unnest(ids, gens) WITH ORDINALITY AS u(id, gen, k)
        LEFT JOIN events AS ev ON ev.id = u.id
        LEFT JOIN flows AS f ON f.flow = ev.flow
        LEFT JOIN events AS nx ON nx.flow = ev.flow AND nx.seq = ev.seq + 1
        ORDER BY u.k
    LOOP
        IF e.flow IS NULL OR e.of_flow > 1 THEN
            RAISE EXCEPTION 'settle_claim: the general path' USING ERRCODE = 'FR001';
        END IF;
        IF e.generation <> e.gen OR e.state <> 'inflight' THEN
            v_outcomes := v_outcomes || 'stale'::text;
        ELSIF tick >= e.lease_until THEN
            v_outcomes := v_outcomes || 'expired'::text;
        ELSIF e.last_seq IS NULL OR (e.seq < e.last_seq AND e.next_id IS NULL) THEN
            RAISE EXCEPTION 'settle_claim: the general path' USING ERRCODE = 'FR001';
        ELSE
            v_outcomes := v_outcomes || 'acked'::text;
            v_acked := v_acked || e.id;
            v_flows := v_flows || e.flow;
            IF e.seq < e.last_seq THEN
                v_heads := v_heads || (e.seq + 1);
                v_ats := v_ats || e.next_at;
                v_enqs := v_enqs || e.next_enqueued;
                v_woke := wake IS NOT NULL;
            ELSE
                v_heads := v_heads || NULL::bigint;
                v_ats := v_ats || NULL::bigint;
                v_enqs := v_enqs || NULL::bigint;
            END IF;
        END IF;
    END LOOP;
    IF cardinality(v_acked) > 0 THEN
        UPDATE events SET state = 'acked', lease_until = 0, acked_at = tick WHERE id = ANY (v_acked);
        INSERT INTO acked (at, event_id) SELECT tick, unnest(v_acked);
        UPDATE flows AS f SET head_seq = u.head, ready_at = u.at,
            ready = coalesce(u.at <= tick, false) AND f.paused IS NULL, head_enqueued_at = u.enq
            FROM unnest(v_flows, v_heads, v_ats, v_enqs) AS u(flow, head, at, enq)
            WHERE f.flow = u.flow;
    END IF;
    IF v_woke THEN
        PERFORM pg_notify(wake, '');
    END IF;
    o_woke := v_woke;
    FOR k IN 1 .. cardinality(v_outcomes) LOOP
        o_k := k - 1;
        o_outcome := v_outcomes[k];
        RETURN NEXT;
    END LOOP;
    IF n > 0 THEN
        UPDATE flows SET ready = true WHERE NOT ready AND ready_at <= tick AND paused IS NULL;
        v_ticket := m.ticket;
        v_lease := tick + m.lease;
        o_k := -1;
        o_outcome := NULL;
        o_woke := false;
        FOR h IN SELECT f.flow, f.head_seq, ev.id, ev.state, ev.attempts, ev.lease_until,
                ev.available_at, ev.body, ev.generation
            FROM flows AS f LEFT JOIN events AS ev ON ev.flow = f.flow AND ev.seq = f.head_seq
            WHERE f.ready AND f.dest = '' ORDER BY f.served, f.flow LIMIT n
        LOOP
            IF h.id IS NULL OR NOT (
                (h.state = 'pending' AND h.available_at <= tick)
                OR (h.state = 'inflight' AND h.lease_until <= tick AND h.attempts < m.max_attempts)) THEN
                RAISE EXCEPTION 'settle_claim: the general path' USING ERRCODE = 'FR001';
            END IF;
            v_ticket := v_ticket + 1;
            v_events := v_events || h.id;
            v_served := v_served || h.flow;
            o_id := h.id;
            o_flow := h.flow;
            o_seq := h.head_seq;
            o_body := h.body;
            o_generation := h.generation + 1;
            o_attempts := h.attempts + 1;
            o_ticket := v_ticket;
            o_lease_until := v_lease;
            RETURN NEXT;
        END LOOP;
        IF v_ticket > m.ticket THEN
            UPDATE events AS ev SET state = 'inflight', generation = ev.generation + 1,
                attempts = ev.attempts + 1, lifetime_attempts = ev.lifetime_attempts + 1,
                lease_until = v_lease, ticket = m.ticket + u.k
                FROM unnest(v_events) WITH ORDINALITY AS u(id, k)
                WHERE ev.id = u.id;
            UPDATE flows SET served = served + 1, ready_at = v_lease, ready = false
                WHERE flow = ANY (v_served);
            UPDATE meta SET ticket = v_ticket WHERE id = 1;
        END IF;
    END IF;
END
$$;
