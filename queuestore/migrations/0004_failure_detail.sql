-- queuestore migration 4 (schema version 3 -> 4): delivery that rides out a
-- bad day (docs/contract.md §7.8).
--
-- meta records the two new parts of the policy: the explicit retry schedule
-- (a JSON array of waits, '[]' for none) and the cap of a failure's
-- retry-after (0: the policy's longest wait). A file of an older version
-- gets no schedule and no cap: its policy is unchanged. Each CHECK names
-- only its own columns' rule: SQLite evaluates a CHECK on an UPDATE only
-- when the UPDATE sets a column it names, so the clock mark's update of
-- every write never evaluates them.
ALTER TABLE meta ADD COLUMN schedule TEXT NOT NULL DEFAULT '[]'
    CHECK (json_valid(schedule) AND json_type(schedule) = 'array' AND json_array_length(schedule) <= 99
        AND (json_array_length(schedule) = 0 OR max_attempts = json_array_length(schedule) + 1));
ALTER TABLE meta ADD COLUMN retry_after_cap INTEGER NOT NULL DEFAULT 0 CHECK (retry_after_cap >= 0);

-- history keeps each event's failed attempts: one row per failed round
-- attempt, at most one per (event, generation), the latest
-- queue.MaxHistory (10) of an event (older rows are deleted, through the
-- primary key, in the transaction that writes a new one). Redrive keeps
-- them. WITHOUT ROWID: the rows live in the primary key's order, so an
-- event's history is one range of the key.
--   at          the tick of the write that recorded the failure
--   generation  the failed claim's generation
--   attempt     the claim's attempt number in its round
--   outcome     what the failure did: 'retry_scheduled' or 'quarantined'
--   reason      the failure reason (lease_expired for the claim's quarantine)
--   error       the failure's error text ('' when none)
CREATE TABLE history (
    event_id   TEXT NOT NULL REFERENCES events (id),
    generation INTEGER NOT NULL CHECK (generation >= 1),
    attempt    INTEGER NOT NULL CHECK (attempt >= 1),
    at         INTEGER NOT NULL CHECK (at >= 0),
    outcome    TEXT NOT NULL CHECK (outcome = 'retry_scheduled' OR outcome = 'quarantined'),
    reason     TEXT NOT NULL CHECK (reason <> ''),
    error      TEXT NOT NULL CHECK (length(CAST(error AS BLOB)) <= 512),
    PRIMARY KEY (event_id, generation)
) STRICT, WITHOUT ROWID;

-- flows.head_enqueued_at is the enqueue tick of the flow's head (NULL with
-- no head), written by the statements that move head_seq. Within a flow
-- sequence order is enqueue order, so the oldest event not acked is the
-- head with the smallest head_enqueued_at: OldestWaiting reads the first
-- entry of flows_head_enqueued (docs/decisions/oldest-waiting.md).
ALTER TABLE flows ADD COLUMN head_enqueued_at INTEGER CHECK (head_enqueued_at >= 0);
UPDATE flows SET head_enqueued_at = (SELECT e.enqueued_at FROM events AS e WHERE e.flow = flows.flow AND e.seq = flows.head_seq)
WHERE head_seq IS NOT NULL;
CREATE INDEX flows_head_enqueued ON flows (head_enqueued_at) WHERE head_enqueued_at IS NOT NULL;
