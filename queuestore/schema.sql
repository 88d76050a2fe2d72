-- queuestore schema, version 3 (PRAGMA user_version is set by Open).
-- migrate_v1_v2.sql turns a version-1 file into version 2, and
-- migrate_v2_v3.sql a version-2 file into this schema. A CHECK constraint
-- never lists values with IN: SQLite would build a temporary table for the
-- list each time it checks a row (migrate_v2_v3.sql).
-- Records are kept forever: nothing here is ever deleted.

-- meta holds the store's single row: the clock mark (the highest tick any
-- write has recorded), the global claim ticket (the last one handed out),
-- the queue's policy (docs/contract.md §7.1; Open writes it when it creates
-- the file, SetPolicy changes it and adds one to policy_rev, which every
-- write reads to know whether its cached policy is current) and the
-- rotation order's virtual time
-- (vnow, vtail, joins: used by the FairRotation policy only).
CREATE TABLE meta (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    clock_mark   INTEGER NOT NULL CHECK (clock_mark >= 0),
    ticket       INTEGER NOT NULL CHECK (ticket >= 0),
    lease        INTEGER NOT NULL DEFAULT 5 CHECK (lease > 0),
    max_attempts INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts BETWEEN 1 AND 100),
    backoff_base INTEGER NOT NULL DEFAULT 2 CHECK (backoff_base > 0),
    backoff_cap  INTEGER NOT NULL DEFAULT 8 CHECK (backoff_cap >= backoff_base),
    jitter       INTEGER NOT NULL DEFAULT 0 CHECK (jitter IN (0, 1)),
    fairness     TEXT NOT NULL DEFAULT 'min_served' CHECK (fairness IN ('min_served', 'rotation')),
    policy_rev   INTEGER NOT NULL DEFAULT 0 CHECK (policy_rev >= 0),
    vnow         INTEGER NOT NULL DEFAULT 0,
    vtail        INTEGER NOT NULL DEFAULT 0,
    joins        INTEGER NOT NULL DEFAULT 0
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
--   weight    the flow's weight under FairRotation (1..1000)
--   pass      the flow's virtual finish time under FairRotation
--   joined    the rotation's join order of the flow under FairRotation
CREATE TABLE flows (
    flow     TEXT PRIMARY KEY,
    last_seq INTEGER NOT NULL CHECK (last_seq >= 1),
    served   INTEGER NOT NULL CHECK (served >= 0),
    head_seq INTEGER CHECK (head_seq BETWEEN 1 AND last_seq),
    ready_at INTEGER,
    ready    INTEGER NOT NULL CHECK (ready = 0 OR ready = 1),
    weight   INTEGER NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
    pass     INTEGER NOT NULL DEFAULT 0,
    joined   INTEGER NOT NULL DEFAULT 0,
    CHECK (ready_at IS NULL OR head_seq IS NOT NULL),
    CHECK (ready = 0 OR ready_at IS NOT NULL)
) STRICT;

-- Flows whose head waits for a tick: a claim promotes those whose tick came.
CREATE INDEX flows_waiting ON flows (ready, ready_at) WHERE ready = 0;

-- Flows whose head is dispatchable, in fairness.MinServed order.
CREATE INDEX flows_ready ON flows (ready, served, flow) WHERE ready = 1;

-- The same flows by the tick their head became due: OldestDue reads the
-- first entry (the relay's oldest-due-age gauge).
CREATE INDEX flows_ready_due ON flows (ready, ready_at) WHERE ready = 1;

-- events holds every event ever enqueued.
--   generation         +1 at every claim and every redrive (0: never claimed)
--   attempts           claims used in the current round (0..MaxAttempts of
--                      the policy when they were made)
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
                      CHECK (state = 'pending' OR state = 'inflight' OR state = 'acked' OR state = 'quarantined'),
    generation        INTEGER NOT NULL CHECK (generation >= attempts),
    attempts          INTEGER NOT NULL CHECK (attempts >= 0),
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

-- Quarantined events by failure reason, for RedriveAll's reason filter.
CREATE INDEX events_quarantined_reason ON events (reason, flow, seq) WHERE state = 'quarantined';

-- audit holds one row per operator action, in write order:
--   kind        'redrive': event_id and its NEW generation, detail NULL;
--               'policy': SetPolicy, detail = {"old": …, "new": …} (JSON);
--               'weight': a flow's weight changed (FairRotation), detail
--               names the flow and the weights
--   reason      the operator's reason
--   at          the tick
CREATE TABLE audit (
    id         INTEGER PRIMARY KEY,
    kind       TEXT NOT NULL DEFAULT 'redrive' CHECK (kind = 'redrive' OR kind = 'policy' OR kind = 'weight'),
    event_id   TEXT REFERENCES events (id),
    generation INTEGER CHECK (generation >= 1),
    reason     TEXT NOT NULL CHECK (reason <> ''),
    detail     TEXT,
    at         INTEGER NOT NULL CHECK (at >= 0),
    CHECK ((kind = 'redrive') = (event_id IS NOT NULL AND generation IS NOT NULL)),
    CHECK ((kind = 'redrive') = (detail IS NULL))
) STRICT;

-- The console pages through flows in these orders (page.go, FlowsPage):
-- most backlog first, most served first, blocked first; each ties by flow
-- name. The expressions are those of page.go's sortKeys, written the same.
CREATE INDEX flows_by_backlog ON flows ((CASE WHEN head_seq IS NULL THEN 0 ELSE head_seq - last_seq - 1 END), flow);
CREATE INDEX flows_by_served ON flows ((-served), flow);
CREATE INDEX flows_by_blocked ON flows ((CASE WHEN head_seq IS NULL THEN 3 WHEN ready_at IS NULL THEN 0 WHEN ready = 0 THEN 1 ELSE 2 END), flow);

-- One event's audit rows, newest first (AuditPage with an EventID).
CREATE INDEX audit_event ON audit (event_id, id) WHERE event_id IS NOT NULL;
