-- pgqueuestore migration 6: failure detail (docs/contract.md §7.8;
-- docs/decisions/postgres-failure-detail.md). meta records the rest of the
-- policy: the retry schedule (an empty array for none; with one,
-- max_attempts is its length plus one) and the retry-after cap (0: the
-- policy's longest wait). attempts is the history of failed attempts, one
-- row per (event, generation), at most queue.MaxHistory per event (the
-- store deletes older rows through the primary key). flows gains
-- head_enqueued_at, the enqueue tick of the flow's head (NULL with no
-- head), set by every statement that moves head_seq, and its partial
-- index: OldestWaiting is that index's first entry. The flows rows that
-- claims and settles update already change indexed columns, so the index
-- costs them one entry each, never a heap-only update; an enqueue onto a
-- flow that has a head writes last_seq alone, as before.
ALTER TABLE {s}.meta
    ADD COLUMN schedule bigint[] NOT NULL DEFAULT '{}'
        CHECK (cardinality(schedule) = 0 OR (
            array_ndims(schedule) = 1 AND array_lower(schedule, 1) = 1
            AND cardinality(schedule) <= 99
            AND array_position(schedule, NULL) IS NULL
            AND 1 <= ALL (schedule)
            AND max_attempts = cardinality(schedule) + 1)),
    ADD COLUMN retry_after_cap bigint NOT NULL DEFAULT 0 CHECK (retry_after_cap >= 0);
CREATE TABLE {s}.attempts (
    event_id   text COLLATE "C" NOT NULL REFERENCES {s}.events (id),
    generation bigint NOT NULL CHECK (generation >= 1),
    attempt    integer NOT NULL CHECK (attempt >= 1),
    at         bigint NOT NULL CHECK (at >= 0),
    outcome    text COLLATE "C" NOT NULL CHECK (outcome = 'retry_scheduled' OR outcome = 'quarantined'),
    reason     text COLLATE "C" NOT NULL CHECK (reason <> ''),
    error      text COLLATE "C" NOT NULL DEFAULT '' CHECK (octet_length(error) <= 512),
    PRIMARY KEY (event_id, generation)
);
ALTER TABLE {s}.flows ADD COLUMN head_enqueued_at bigint;
UPDATE {s}.flows AS f SET head_enqueued_at = e.enqueued_at
FROM {s}.events AS e WHERE e.flow = f.flow AND e.seq = f.head_seq;
ALTER TABLE {s}.flows ADD CONSTRAINT flows_head_enqueued_at_check
    CHECK ((head_enqueued_at IS NULL) = (head_seq IS NULL) AND (head_enqueued_at IS NULL OR head_enqueued_at >= 0));
CREATE INDEX flows_head_enqueued ON {s}.flows (head_enqueued_at) WHERE head_enqueued_at IS NOT NULL;
