-- queuestore migration 6 (schema version 5 -> 6): destinations
-- (docs/contract.md §7.11).
--
-- destinations holds the registered receivers: the URL, the signing secrets
-- (a JSON array of strings; never written to an audit row or a snapshot),
-- the limits (concurrency: claims in flight at once, rate: claims per 1000
-- ticks; 0 is no limit), the operator's pause (its reason, NULL when not
-- paused) and the rate's token bucket: tokens in thousandths of a claim,
-- as of the tick refilled_at. A claim refills the bucket by
-- (now - refilled_at) * rate thousandths, at most up to rate * 1000, and
-- takes 1000 per claim; it writes the bucket only when it claimed.
CREATE TABLE destinations (
    name        TEXT PRIMARY KEY CHECK (name <> ''),
    url         TEXT NOT NULL CHECK (url <> ''),
    secrets     TEXT NOT NULL,
    concurrency INTEGER NOT NULL DEFAULT 0 CHECK (concurrency >= 0),
    rate        INTEGER NOT NULL DEFAULT 0 CHECK (rate >= 0),
    paused      TEXT CHECK (paused <> ''),
    tokens      INTEGER NOT NULL DEFAULT 0 CHECK (tokens >= 0),
    refilled_at INTEGER NOT NULL DEFAULT 0 CHECK (refilled_at >= 0)
) STRICT;

-- flows.dest is the flow's destination ('' = the default one), named by its
-- first event. events.dest is the destination of the event's last claim,
-- written by the claim, so that events_dest_inflight counts a destination's
-- claims in flight with unexpired leases (bounded by its concurrency). An
-- event of the default destination never enters that index.
ALTER TABLE flows ADD COLUMN dest TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN dest TEXT NOT NULL DEFAULT '';
CREATE INDEX events_dest_inflight ON events (dest, lease_until) WHERE state = 'inflight' AND dest <> '';

-- The ready index gets the destination after the ready flag: a claim reads
-- one range per destination it may pick from, in the order's key, and a
-- queue without destinations reads the '' range only. It replaces the old
-- one (one index, no more writes). The rotation's index (flows_rotation)
-- follows the recorded policy: it is dropped here and Open creates it again,
-- destination-prefixed, when the policy is the rotation.
DROP INDEX flows_ready;
CREATE INDEX flows_ready ON flows (ready, dest, served, flow) WHERE ready = 1;
DROP INDEX IF EXISTS flows_rotation;

-- flows_dest finds a named destination's flows for an operator's read
-- (Destinations: its flows and backlog); the default destination's flows are
-- not in it.
CREATE INDEX flows_dest ON flows (dest, flow) WHERE dest <> '';

-- audit gets the destination kinds. A CHECK constraint cannot be altered,
-- so the table is rebuilt (SQLite's table-rebuild procedure), each row
-- keeping its id, and its indexes created again.
CREATE TABLE audit_v6 (
    id         INTEGER PRIMARY KEY,
    kind       TEXT NOT NULL DEFAULT 'redrive'
               CHECK (kind = 'redrive' OR kind = 'policy' OR kind = 'weight' OR kind = 'pause' OR kind = 'resume'
                   OR kind = 'destination' OR kind = 'destination_pause' OR kind = 'destination_resume'
                   OR kind = 'flow_destination'),
    event_id   TEXT REFERENCES events (id),
    generation INTEGER CHECK (generation >= 1),
    reason     TEXT NOT NULL CHECK (reason <> ''),
    detail     TEXT,
    at         INTEGER NOT NULL CHECK (at >= 0),
    CHECK ((kind = 'redrive') = (event_id IS NOT NULL AND generation IS NOT NULL)),
    CHECK ((kind = 'redrive') = (detail IS NULL))
) STRICT;
INSERT INTO audit_v6 (id, kind, event_id, generation, reason, detail, at)
SELECT id, kind, event_id, generation, reason, detail, at FROM audit ORDER BY id;
DROP TABLE audit;
ALTER TABLE audit_v6 RENAME TO audit;
CREATE INDEX audit_event ON audit (event_id, id) WHERE event_id IS NOT NULL;
CREATE INDEX audit_at ON audit (at);
