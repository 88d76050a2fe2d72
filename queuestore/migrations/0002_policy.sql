-- queuestore migration 2 (schema version 1 -> 2), as released: the policy
-- in meta (docs/contract.md §7.1), the rotation order's columns (§7.6),
-- audit rows of every kind, and the indexes of the console's pages and of
-- OldestDue. A CHECK constraint cannot be altered, so events and audit are
-- rebuilt (SQLite's table-rebuild procedure; Open runs every migration with
-- foreign keys off and checks them before it commits). A version-1 file gets
-- the default policy from the columns' defaults.
ALTER TABLE meta ADD COLUMN lease INTEGER NOT NULL DEFAULT 5 CHECK (lease > 0);
ALTER TABLE meta ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts BETWEEN 1 AND 100);
ALTER TABLE meta ADD COLUMN backoff_base INTEGER NOT NULL DEFAULT 2 CHECK (backoff_base > 0);
ALTER TABLE meta ADD COLUMN backoff_cap INTEGER NOT NULL DEFAULT 8 CHECK (backoff_cap >= backoff_base);
ALTER TABLE meta ADD COLUMN jitter INTEGER NOT NULL DEFAULT 0 CHECK (jitter IN (0, 1));
ALTER TABLE meta ADD COLUMN fairness TEXT NOT NULL DEFAULT 'min_served' CHECK (fairness IN ('min_served', 'rotation'));
ALTER TABLE meta ADD COLUMN policy_rev INTEGER NOT NULL DEFAULT 0 CHECK (policy_rev >= 0);
ALTER TABLE meta ADD COLUMN vnow INTEGER NOT NULL DEFAULT 0;
ALTER TABLE meta ADD COLUMN vtail INTEGER NOT NULL DEFAULT 0;
ALTER TABLE meta ADD COLUMN joins INTEGER NOT NULL DEFAULT 0;
ALTER TABLE flows ADD COLUMN weight INTEGER NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000);
ALTER TABLE flows ADD COLUMN pass INTEGER NOT NULL DEFAULT 0;
ALTER TABLE flows ADD COLUMN joined INTEGER NOT NULL DEFAULT 0;
CREATE TABLE events_v2 (
    id                TEXT PRIMARY KEY,
    flow              TEXT NOT NULL REFERENCES flows (flow),
    seq               INTEGER NOT NULL CHECK (seq >= 1),
    body              BLOB NOT NULL CHECK (length(body) >= 1),
    state             TEXT NOT NULL
                      CHECK (state IN ('pending', 'inflight', 'acked', 'quarantined')),
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
INSERT INTO events_v2 (id, flow, seq, body, state, generation, attempts, lifetime_attempts,
    available_at, lease_until, ticket, reason, enqueued_at)
SELECT id, flow, seq, body, state, generation, attempts, lifetime_attempts,
    available_at, lease_until, ticket, reason, enqueued_at FROM events ORDER BY rowid;
CREATE TABLE audit_v2 (
    id         INTEGER PRIMARY KEY,
    kind       TEXT NOT NULL DEFAULT 'redrive' CHECK (kind IN ('redrive', 'policy', 'weight')),
    event_id   TEXT REFERENCES events (id),
    generation INTEGER CHECK (generation >= 1),
    reason     TEXT NOT NULL CHECK (reason <> ''),
    detail     TEXT,
    at         INTEGER NOT NULL CHECK (at >= 0),
    CHECK ((kind = 'redrive') = (event_id IS NOT NULL AND generation IS NOT NULL)),
    CHECK ((kind = 'redrive') = (detail IS NULL))
) STRICT;
INSERT INTO audit_v2 (id, kind, event_id, generation, reason, detail, at)
SELECT id, 'redrive', event_id, generation, reason, NULL, at FROM audit ORDER BY id;
DROP TABLE audit;
DROP TABLE events;
ALTER TABLE events_v2 RENAME TO events;
ALTER TABLE audit_v2 RENAME TO audit;
CREATE INDEX events_quarantined ON events (flow, seq) WHERE state = 'quarantined';
CREATE INDEX events_quarantined_reason ON events (reason, flow, seq) WHERE state = 'quarantined';
CREATE INDEX flows_by_backlog ON flows ((CASE WHEN head_seq IS NULL THEN 0 ELSE head_seq - last_seq - 1 END), flow);
CREATE INDEX flows_by_served ON flows ((-served), flow);
CREATE INDEX flows_by_blocked ON flows ((CASE WHEN head_seq IS NULL THEN 3 WHEN ready_at IS NULL THEN 0 WHEN ready = 0 THEN 1 ELSE 2 END), flow);
CREATE INDEX audit_event ON audit (event_id, id) WHERE event_id IS NOT NULL;
CREATE INDEX flows_ready_due ON flows (ready, ready_at) WHERE ready = 1;
