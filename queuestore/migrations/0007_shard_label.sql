-- queuestore migration 7 (schema version 6 -> 7): shards (docs/contract.md
-- §7.10).
--
-- meta records the store's shard label: its index, the shard count of its
-- set and the set's epoch; all three NULL for a store never labeled (a
-- queue that is not sharded). The label is written once (SetShardLabel)
-- and never changed in place. Each CHECK names only its own columns (see
-- migration 4).
ALTER TABLE meta ADD COLUMN shard_index INTEGER CHECK (shard_index >= 0);
ALTER TABLE meta ADD COLUMN shard_count INTEGER CHECK (shard_count BETWEEN 1 AND 256);
ALTER TABLE meta ADD COLUMN shard_epoch INTEGER CHECK (shard_epoch >= 0);

-- audit gets the kind 'shard' (SetShardLabel, and a reshard's import of
-- queue-wide rows). A CHECK constraint cannot be altered, so the table is
-- rebuilt (SQLite's table-rebuild procedure), each row keeping its id, and
-- its indexes created again.
CREATE TABLE audit_v7 (
    id         INTEGER PRIMARY KEY,
    kind       TEXT NOT NULL DEFAULT 'redrive'
               CHECK (kind = 'redrive' OR kind = 'policy' OR kind = 'weight' OR kind = 'pause' OR kind = 'resume'
                   OR kind = 'destination' OR kind = 'destination_pause' OR kind = 'destination_resume'
                   OR kind = 'flow_destination' OR kind = 'shard'),
    event_id   TEXT REFERENCES events (id),
    generation INTEGER CHECK (generation >= 1),
    reason     TEXT NOT NULL CHECK (reason <> ''),
    detail     TEXT,
    at         INTEGER NOT NULL CHECK (at >= 0),
    CHECK ((kind = 'redrive') = (event_id IS NOT NULL AND generation IS NOT NULL)),
    CHECK ((kind = 'redrive') = (detail IS NULL))
) STRICT;
INSERT INTO audit_v7 (id, kind, event_id, generation, reason, detail, at)
SELECT id, kind, event_id, generation, reason, detail, at FROM audit ORDER BY id;
DROP TABLE audit;
ALTER TABLE audit_v7 RENAME TO audit;
CREATE INDEX audit_event ON audit (event_id, id) WHERE event_id IS NOT NULL;
CREATE INDEX audit_at ON audit (at);

-- audit_flow finds the rows about one flow (weight, pause, resume,
-- flow_destination: their detail names the flow), for ExportFlow: one
-- range of the index per flow, never a scan of the audit. Rows of other
-- kinds have no "flow" in their detail (NULL in the index).
CREATE INDEX audit_flow ON audit (json_extract(detail, '$.flow'), id) WHERE detail IS NOT NULL;
