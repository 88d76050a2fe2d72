-- queuestore migration 9 (schema version 8 -> 9): Prune deletes events
-- acked at the same tick in byte order of their IDs, as pgqueuestore's
-- acked table (primary key (at, event_id)) does, so that one batch
-- deletes the same events on both stores (docs/contract.md §7.9). The
-- index had acked_at alone, whose ties SQLite orders by rowid (enqueue
-- order).
DROP INDEX events_acked;
CREATE INDEX events_acked ON events (acked_at, id) WHERE state = 'acked';
