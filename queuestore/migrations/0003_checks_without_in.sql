-- queuestore migration 3 (schema version 2 -> 3): the CHECK constraints
-- that listed values with IN are spelled as comparisons joined by OR: the
-- same rule, but SQLite builds a temporary table for an IN list each time it
-- checks a row, on every insert and on every update of the column
-- (docs/decisions/check-constraints-without-in.md). A CHECK
-- constraint cannot be altered, so flows, events and audit are rebuilt
-- (SQLite's table-rebuild procedure), each row keeping its rowid, and every
-- index of these tables is created again. A version-2 file made before
-- OldestDue has no flows_ready_due: it gets it here. The rotation's index
-- (flows_rotation) follows the recorded policy, not the version: Open creates
-- it again after the migrations when the policy is the rotation.
CREATE TABLE flows_v3 (
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
INSERT INTO flows_v3 (rowid, flow, last_seq, served, head_seq, ready_at, ready, weight, pass, joined)
SELECT rowid, flow, last_seq, served, head_seq, ready_at, ready, weight, pass, joined FROM flows ORDER BY rowid;
CREATE TABLE events_v3 (
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
INSERT INTO events_v3 (rowid, id, flow, seq, body, state, generation, attempts, lifetime_attempts,
    available_at, lease_until, ticket, reason, enqueued_at)
SELECT rowid, id, flow, seq, body, state, generation, attempts, lifetime_attempts,
    available_at, lease_until, ticket, reason, enqueued_at FROM events ORDER BY rowid;
CREATE TABLE audit_v3 (
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
INSERT INTO audit_v3 (id, kind, event_id, generation, reason, detail, at)
SELECT id, kind, event_id, generation, reason, detail, at FROM audit ORDER BY id;
DROP TABLE audit;
DROP TABLE events;
DROP TABLE flows;
ALTER TABLE flows_v3 RENAME TO flows;
ALTER TABLE events_v3 RENAME TO events;
ALTER TABLE audit_v3 RENAME TO audit;

CREATE INDEX flows_waiting ON flows (ready, ready_at) WHERE ready = 0;
CREATE INDEX flows_ready ON flows (ready, served, flow) WHERE ready = 1;
CREATE INDEX flows_ready_due ON flows (ready, ready_at) WHERE ready = 1;
CREATE INDEX events_quarantined ON events (flow, seq) WHERE state = 'quarantined';
CREATE INDEX events_quarantined_reason ON events (reason, flow, seq) WHERE state = 'quarantined';
CREATE INDEX flows_by_backlog ON flows ((CASE WHEN head_seq IS NULL THEN 0 ELSE head_seq - last_seq - 1 END), flow);
CREATE INDEX flows_by_served ON flows ((-served), flow);
CREATE INDEX flows_by_blocked ON flows ((CASE WHEN head_seq IS NULL THEN 3 WHEN ready_at IS NULL THEN 0 WHEN ready = 0 THEN 1 ELSE 2 END), flow);
CREATE INDEX audit_event ON audit (event_id, id) WHERE event_id IS NOT NULL;
