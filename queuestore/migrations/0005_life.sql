-- queuestore migration 5 (schema version 4 -> 5): the life of an event
-- (docs/contract.md §7.9): scheduled events, the operator's pause and
-- retention.
--
-- events.acked_at is the tick of the settle that acked the event (0 unless
-- acked); Prune deletes acked events whose acked_at is at or below now -
-- retention. An event acked before this migration gets the clock mark: its
-- ack tick was not recorded, and the mark is the latest it can have been,
-- so it waits a full window before it may be pruned.
-- events_acked finds the prunable events, oldest ack first, through the
-- index alone: only acked events are in it.
ALTER TABLE events ADD COLUMN acked_at INTEGER NOT NULL DEFAULT 0 CHECK (acked_at >= 0);
UPDATE events SET acked_at = (SELECT clock_mark FROM meta WHERE id = 1) WHERE state = 'acked';
CREATE INDEX events_acked ON events (acked_at) WHERE state = 'acked';

-- flows.paused is the reason of the operator's pause (NULL when the flow is
-- not paused). A paused flow's head is kept out of the claim's indexes as a
-- quarantined head is: ready_at NULL, ready 0. flows_paused_blocks keeps it
-- so whatever statement moves the head or its lease (a settle, an extend,
-- an enqueue that gives the flow a head, a redrive), and ResumeFlow sets
-- ready_at again from the head. The trigger's WHEN is false for every flow
-- that is not paused: its only cost there is that test.
ALTER TABLE flows ADD COLUMN paused TEXT CHECK (paused <> '');
CREATE TRIGGER flows_paused_blocks AFTER UPDATE OF ready_at, ready ON flows
WHEN NEW.paused IS NOT NULL AND (NEW.ready_at IS NOT NULL OR NEW.ready <> 0)
BEGIN
    UPDATE flows SET ready_at = NULL, ready = 0 WHERE rowid = NEW.rowid;
END;
CREATE INDEX flows_paused ON flows (flow) WHERE paused IS NOT NULL;

-- meta.retention is the policy's retention window in ticks (0: keep
-- everything forever). Its CHECK names only its own column (see migration
-- 4).
ALTER TABLE meta ADD COLUMN retention INTEGER NOT NULL DEFAULT 0 CHECK (retention >= 0);

-- audit gets the kinds 'pause' and 'resume'. A CHECK constraint cannot be
-- altered, so the table is rebuilt (SQLite's table-rebuild procedure), each
-- row keeping its id, and its indexes created again; audit_at finds the
-- prunable rows, oldest first.
CREATE TABLE audit_v5 (
    id         INTEGER PRIMARY KEY,
    kind       TEXT NOT NULL DEFAULT 'redrive'
               CHECK (kind = 'redrive' OR kind = 'policy' OR kind = 'weight' OR kind = 'pause' OR kind = 'resume'),
    event_id   TEXT REFERENCES events (id),
    generation INTEGER CHECK (generation >= 1),
    reason     TEXT NOT NULL CHECK (reason <> ''),
    detail     TEXT,
    at         INTEGER NOT NULL CHECK (at >= 0),
    CHECK ((kind = 'redrive') = (event_id IS NOT NULL AND generation IS NOT NULL)),
    CHECK ((kind = 'redrive') = (detail IS NULL))
) STRICT;
INSERT INTO audit_v5 (id, kind, event_id, generation, reason, detail, at)
SELECT id, kind, event_id, generation, reason, detail, at FROM audit ORDER BY id;
DROP TABLE audit;
ALTER TABLE audit_v5 RENAME TO audit;
CREATE INDEX audit_event ON audit (event_id, id) WHERE event_id IS NOT NULL;
CREATE INDEX audit_at ON audit (at);
