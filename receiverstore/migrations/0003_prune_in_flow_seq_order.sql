-- receiverstore migration 3 (schema version 2 -> 3): Prune takes receipts
-- accepted at the same time in order of their flow, then their seq, as
-- pgreceiverstore's migration 5 makes it there, so that one batch deletes
-- the same receipts on both stores (docs/contract.md §7.9). The index had
-- accepted_at alone, whose ties SQLite orders by rowid (insert order); a
-- sort of every tied receipt would be needed to order them otherwise.
-- Like every migration file it never changes once released
-- (docs/decisions/migrations.md).
DROP INDEX receipts_accepted_at;
CREATE INDEX receipts_accepted_at ON receipts (accepted_at, flow, seq);
