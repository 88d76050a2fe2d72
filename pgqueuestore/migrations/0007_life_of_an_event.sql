-- pgqueuestore migration 7: the life of an event (docs/contract.md §7.9;
-- docs/decisions/postgres-transactional-enqueue.md).
-- Retention: meta records the policy's retention window (0: forever);
-- events gain acked_at, the tick of the settle that acked them (NULL
-- unless acked), read by Event alone; what Prune deletes through is a
-- table of its own, acked (tick, event), that an ack inserts into, so that
-- an ack stays a heap-only update of events (no index of events reads a
-- column a claim or an ack writes: docs/decisions/postgres-hot-updates.md).
-- An event acked before this migration gets the clock mark as its tick, so
-- it is never pruned earlier than its true ack allows. Audit rows are
-- pruned through an index on their tick, and a redrive row no longer
-- references events, so that it may outlive its event (an event's ID may
-- be enqueued again once pruned).
ALTER TABLE {s}.meta ADD COLUMN retention bigint NOT NULL DEFAULT 0 CHECK (retention >= 0);
ALTER TABLE {s}.events ADD COLUMN acked_at bigint CHECK (acked_at >= 0);
UPDATE {s}.events SET acked_at = (SELECT clock_mark FROM {s}.meta WHERE id = 1) WHERE state = 'acked';
CREATE TABLE {s}.acked (
    at       bigint NOT NULL CHECK (at >= 0),
    event_id text COLLATE "C" NOT NULL,
    PRIMARY KEY (at, event_id)
);
INSERT INTO {s}.acked (at, event_id) SELECT acked_at, id FROM {s}.events WHERE state = 'acked';
ALTER TABLE {s}.audit DROP CONSTRAINT audit_event_id_fkey;
ALTER TABLE {s}.audit DROP CONSTRAINT audit_kind_check;
ALTER TABLE {s}.audit ADD CONSTRAINT audit_kind_check
    CHECK (kind IN ('redrive', 'policy', 'weight', 'pause', 'resume'));
CREATE INDEX audit_at ON {s}.audit (at, id);
-- Pause: the operator's reason while a flow is paused (NULL otherwise). A
-- paused flow's head is kept out of the claim's indexes as a quarantined
-- head is, ready_at NULL and ready false (queuestore's layout, so the
-- snapshots compare): the trigger flows_paused_blocks keeps it so whatever
-- statement moves the head or its lease (a settle, an extend, a promotion,
-- a redrive), and ResumeFlow sets ready_at again from the head. Its WHEN is
-- false for every flow that is not paused. The index of the flows whose
-- head waits for a tick leaves paused flows out as well.
ALTER TABLE {s}.flows ADD COLUMN paused text COLLATE "C" CHECK (paused <> '');
ALTER TABLE {s}.flows ADD CONSTRAINT flows_paused_blocked CHECK (paused IS NULL OR (ready_at IS NULL AND NOT ready));
CREATE FUNCTION {s}.flows_paused_blocks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.ready_at := NULL;
    NEW.ready := false;
    RETURN NEW;
END
$$;
CREATE TRIGGER flows_paused_blocks BEFORE UPDATE ON {s}.flows
    FOR EACH ROW WHEN (NEW.paused IS NOT NULL AND (NEW.ready_at IS NOT NULL OR NEW.ready))
    EXECUTE FUNCTION {s}.flows_paused_blocks();
DROP INDEX {s}.flows_waiting;
CREATE INDEX flows_waiting ON {s}.flows (ready_at) WHERE NOT ready AND paused IS NULL;
-- Transactional enqueue: each flow's sequence counter moves out of the
-- flows row that claims and settles update, into flow_seqs, which every
-- enqueue (plain or in a caller's transaction) locks before anything else;
-- flows.last_seq stays the last event the flows row knows of (its head's
-- successor check). An enqueue in a caller's transaction inserts its
-- events and one arrivals row per flow and touches neither flows nor meta;
-- the store's next write turn promotes committed arrivals into heads. The
-- trigger that checks an inserted event's flow checks flow_seqs, which
-- the enqueue writes first in either path.
CREATE TABLE {s}.flow_seqs (
    flow     text COLLATE "C" PRIMARY KEY,
    last_seq bigint NOT NULL CHECK (last_seq >= 0)
);
INSERT INTO {s}.flow_seqs (flow, last_seq) SELECT flow, last_seq FROM {s}.flows;
CREATE TABLE {s}.arrivals (
    id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    flow text COLLATE "C" NOT NULL
);
CREATE OR REPLACE FUNCTION {s}.events_flow_exists() RETURNS trigger LANGUAGE plpgsql
SET search_path = {s}, pg_temp AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM inserted AS n
               WHERE NOT EXISTS (SELECT 1 FROM flow_seqs AS f WHERE f.flow = n.flow)) THEN
        RAISE foreign_key_violation USING MESSAGE = 'insert into events: the event''s flow is not in flow_seqs';
    END IF;
    RETURN NULL;
END
$$;
