-- queuestore migration 1: the schema of version 1, as the version-1 build
-- created it. Like every migration file it never changes once released
-- (docs/decisions/migrations.md); Open records each version it reaches in
-- PRAGMA user_version.
-- Records are kept forever: nothing here is ever deleted.

-- meta holds the store's single row: the clock mark (the highest tick any
-- write has recorded) and the global claim ticket (the last one handed out).
CREATE TABLE meta (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    clock_mark INTEGER NOT NULL CHECK (clock_mark >= 0),
    ticket     INTEGER NOT NULL CHECK (ticket >= 0)
) STRICT;

INSERT INTO meta (id, clock_mark, ticket) VALUES (1, 0, 0);

-- flows keeps each flow's sequence counter, its served count and its head,
-- updated in the same transactions that change them, so that a claim finds
-- the next flow through an index instead of scanning events.
--   last_seq  the highest sequence number handed out in the flow
--   head_seq  the flow's lowest event that is not acked; NULL when all are
--   ready_at  the tick from which the head is dispatchable: available_at of a
--             pending head, lease_until of an inflight head; NULL for a
--             quarantined head or no head
--   ready     1 once ready_at <= the clock mark; it only ever turns on with
--             time (ticks never go backwards), and is reset to 0 whenever the
--             head changes
CREATE TABLE flows (
    flow     TEXT PRIMARY KEY,
    last_seq INTEGER NOT NULL CHECK (last_seq >= 1),
    served   INTEGER NOT NULL CHECK (served >= 0),
    head_seq INTEGER CHECK (head_seq BETWEEN 1 AND last_seq),
    ready_at INTEGER,
    ready    INTEGER NOT NULL CHECK (ready IN (0, 1)),
    CHECK (ready_at IS NULL OR head_seq IS NOT NULL),
    CHECK (ready = 0 OR ready_at IS NOT NULL)
) STRICT;

-- Flows whose head waits for a tick: a claim promotes those whose tick came.
CREATE INDEX flows_waiting ON flows (ready, ready_at) WHERE ready = 0;

-- Flows whose head is dispatchable, in fairness.MinServed order.
CREATE INDEX flows_ready ON flows (ready, served, flow) WHERE ready = 1;

-- events holds every event ever enqueued.
--   generation         +1 at every claim and every redrive (0: never claimed)
--   attempts           claims used in the current round (0..3)
--   lifetime_attempts  claims used over all rounds
--   lease_until        the lease of an inflight event; 0 otherwise
--   ticket             the global ticket of the event's last claim; 0: never
--   reason             the last failure reason; '' when none or redriven
CREATE TABLE events (
    id                TEXT PRIMARY KEY,
    flow              TEXT NOT NULL REFERENCES flows (flow),
    seq               INTEGER NOT NULL CHECK (seq >= 1),
    body              BLOB NOT NULL CHECK (length(body) >= 1),
    state             TEXT NOT NULL
                      CHECK (state IN ('pending', 'inflight', 'acked', 'quarantined')),
    generation        INTEGER NOT NULL CHECK (generation >= attempts),
    attempts          INTEGER NOT NULL CHECK (attempts BETWEEN 0 AND 3),
    lifetime_attempts INTEGER NOT NULL CHECK (lifetime_attempts >= attempts),
    available_at      INTEGER NOT NULL CHECK (available_at >= 0),
    lease_until       INTEGER NOT NULL CHECK ((state = 'inflight') = (lease_until > 0)),
    ticket            INTEGER NOT NULL CHECK (ticket >= 0),
    reason            TEXT NOT NULL CHECK (state <> 'quarantined' OR reason <> ''),
    enqueued_at       INTEGER NOT NULL CHECK (enqueued_at >= 0),
    CHECK (state <> 'inflight' OR attempts >= 1),
    UNIQUE (flow, seq)
) STRICT;

-- Quarantined events, for the operator's list.
CREATE INDEX events_quarantined ON events (flow, seq) WHERE state = 'quarantined';

-- audit holds one row per redrive: the event, its NEW generation, the
-- operator's reason and the tick.
CREATE TABLE audit (
    id         INTEGER PRIMARY KEY,
    event_id   TEXT NOT NULL REFERENCES events (id),
    generation INTEGER NOT NULL CHECK (generation >= 1),
    reason     TEXT NOT NULL CHECK (reason <> ''),
    at         INTEGER NOT NULL CHECK (at >= 0)
) STRICT;
