-- pgreceiverstore migration 4: receive_accepted moves the known flows
-- with one key probe per flow of the batch
-- (docs/decisions/postgres-server-side-transitions.md, "Large batches").
-- Migration 3's update found each row's values with array_position, a
-- search of the batch's flows for every row it touched: quadratic, 2.2 s
-- for a batch of 10,000 messages of known flows. The rest of the function
-- is migration 3's, unchanged. "{s}" is the quoted schema name; like every
-- migration file it never changes once released
-- (docs/decisions/migrations.md).
CREATE OR REPLACE FUNCTION {s}.receive_accepted(m_ids text[], m_flows text[], m_seqs bigint[], m_bodies bytea[],
    m_deltas bigint[], m_ats timestamptz[], wkey bigint, keys bigint[])
RETURNS void
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
    k bigint;
    v_ok boolean;
    v_flows text[];   -- each flow of the batch once
    v_was bigint[];   -- its next expected seq as read; NULL: no row yet
    v_next bigint[];  -- its next expected seq after the batch
    v_add bigint[];   -- the sum of its messages' deltas
    v_moved bigint;
BEGIN
    -- The general path's locks, in its order (withWriteTx): the same keys
    -- in the same order keep every pair of writers free of deadlocks,
    -- whichever path each takes.
    IF keys IS NULL THEN
        PERFORM pg_advisory_xact_lock(wkey);
    ELSE
        PERFORM pg_advisory_xact_lock_shared(wkey);
        FOREACH k IN ARRAY keys LOOP
            PERFORM pg_advisory_xact_lock(k);
        END LOOP;
    END IF;
    -- qRead's key probes, one of each per message, and the check, in one
    -- statement. Every message is accepted, each after the ones before it,
    -- when for each: no receipt has its ID or its (flow, seq), no other
    -- message of the batch has its ID, and its seq is its flow's next
    -- expected one (1 for a flow with no row) plus the number of earlier
    -- messages of its flow, above the flow's pruned mark. Then each flow's
    -- messages are its next seqs in order, and its first message (before =
    -- 0) gives the flow's move: from the next expected seq read, to its
    -- seq plus the flow's number of messages, its total up by their deltas.
    SELECT bool_and(r.id IS NULL AND o.id IS NULL AND u.same_id = 1
            AND u.seq = coalesce(f.next_expected, 1) + u.before
            AND u.seq > coalesce(f.pruned_through, 0)),
        array_agg(u.flow ORDER BY u.n) FILTER (WHERE u.before = 0),
        array_agg(f.next_expected ORDER BY u.n) FILTER (WHERE u.before = 0),
        array_agg(u.seq + u.of_flow ORDER BY u.n) FILTER (WHERE u.before = 0),
        array_agg(u.add ORDER BY u.n) FILTER (WHERE u.before = 0)
        INTO v_ok, v_flows, v_was, v_next, v_add
    FROM (SELECT x.id, x.flow, x.seq, x.n,
            row_number() OVER (PARTITION BY x.flow ORDER BY x.n) - 1 AS before,
            count(*) OVER (PARTITION BY x.flow) AS of_flow,
            sum(x.delta) OVER (PARTITION BY x.flow)::bigint AS add,
            count(*) OVER (PARTITION BY x.id) AS same_id
        FROM unnest(m_ids, m_flows, m_seqs, m_deltas) WITH ORDINALITY AS x (id, flow, seq, delta, n)) AS u
    LEFT JOIN LATERAL (SELECT x.id FROM receipts AS x WHERE x.id = u.id LIMIT 1) AS r ON true
    LEFT JOIN LATERAL (SELECT x.id FROM receipts AS x WHERE x.flow = u.flow AND x.seq = u.seq LIMIT 1) AS o ON true
    LEFT JOIN LATERAL (SELECT x.next_expected, x.pruned_through FROM flows AS x WHERE x.flow = u.flow LIMIT 1) AS f ON true;
    IF v_ok IS NOT TRUE THEN
        RAISE EXCEPTION 'receive_accepted: the general path' USING ERRCODE = 'FR001';
    END IF;
    -- The general path's writes (qInsertReceipts, qInsertFlows,
    -- qAdvanceFlows), one statement per table and kind.
    INSERT INTO receipts (id, flow, seq, body, delta, accepted_at)
        SELECT * FROM unnest(m_ids, m_flows, m_seqs, m_bodies, m_deltas, m_ats);
    INSERT INTO flows (flow, next_expected, total)
        SELECT u.flow, u.next, u.add FROM unnest(v_flows, v_was, v_next, v_add) AS u (flow, was, next, add)
        WHERE u.was IS NULL;
    -- Each flow that had a row moves from the next expected seq read, each
    -- element of the arrays probing the key for its row, as qAdvanceFlows.
    -- Under the locks every such row moves; one that did not is an error,
    -- not a fallback: the batch was decided on what the read saw.
    UPDATE flows AS f SET total = f.total + u.add, next_expected = u.next
        FROM unnest(v_flows, v_was, v_next, v_add) AS u (flow, was, next, add)
        WHERE f.flow = u.flow AND f.next_expected = u.was;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    IF v_moved <> cardinality(array_remove(v_was, NULL)) THEN
        RAISE EXCEPTION 'receive_accepted: % rows changed, want %', v_moved, cardinality(array_remove(v_was, NULL));
    END IF;
    -- The receipts' foreign key (deferred, migration 1) would be checked
    -- at commit, after the function, without its plan settings: checked
    -- here instead, under them, as the general path's checks run under
    -- qKeyPlans at its COMMIT. Named: other deferred triggers (none of the
    -- store's) still run at commit.
    SET CONSTRAINTS receipts_flow_fkey IMMEDIATE;
END
$$;
