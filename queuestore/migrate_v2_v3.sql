-- queuestore: schema version 2 -> 3, run by Open in ONE transaction with
-- foreign keys off, after migrate_v1_v2.sql for a version-1 file.
-- Version 3 spells the CHECK constraints that listed values with IN as
-- comparisons joined by OR: the same rule, but SQLite builds a temporary
-- table for an IN list each time it checks a row, on every insert and on
-- every update of the column (queuestore/DECISIONS.md, "CHECK constraints
-- without IN lists"). A CHECK constraint cannot be altered, so flows,
-- events and audit are rebuilt (SQLite's table-rebuild procedure), each
-- row keeping its rowid. Open then creates every index these tables had
-- again, with its own SQL. Statements are separated by a line holding only
-- "-- step".
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
-- step
INSERT INTO flows_v3 (rowid, flow, last_seq, served, head_seq, ready_at, ready, weight, pass, joined)
SELECT rowid, flow, last_seq, served, head_seq, ready_at, ready, weight, pass, joined FROM flows ORDER BY rowid;
-- step
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
-- step
INSERT INTO events_v3 (rowid, id, flow, seq, body, state, generation, attempts, lifetime_attempts,
    available_at, lease_until, ticket, reason, enqueued_at)
SELECT rowid, id, flow, seq, body, state, generation, attempts, lifetime_attempts,
    available_at, lease_until, ticket, reason, enqueued_at FROM events ORDER BY rowid;
-- step
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
-- step
INSERT INTO audit_v3 (id, kind, event_id, generation, reason, detail, at)
SELECT id, kind, event_id, generation, reason, detail, at FROM audit ORDER BY id;
-- step
DROP TABLE audit;
-- step
DROP TABLE events;
-- step
DROP TABLE flows;
-- step
ALTER TABLE flows_v3 RENAME TO flows;
-- step
ALTER TABLE events_v3 RENAME TO events;
-- step
ALTER TABLE audit_v3 RENAME TO audit;
