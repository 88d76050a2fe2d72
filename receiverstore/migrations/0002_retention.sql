-- receiverstore migration 2: retention of receipts (docs/contract.md §7.9).
-- Like every migration file it never changes once released
-- (docs/decisions/migrations.md).

-- receipts.accepted_at: the wall-clock time the receipt was accepted, in
-- microseconds since the Unix epoch (the store's clock, WithNow). Receipts
-- of an older file get the migration's time: a receipt is never pruned
-- earlier than its retention window allows, only later.
ALTER TABLE receipts ADD COLUMN accepted_at INTEGER NOT NULL DEFAULT 0;
UPDATE receipts SET accepted_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER);

-- Prune and Prunable find the oldest receipts through this index, never by
-- scanning receipts.
CREATE INDEX receipts_accepted_at ON receipts (accepted_at);

-- flows.pruned_through: the highest seq of the flow whose receipt Prune
-- deleted; 0 before any. A later message of the flow at or below it with no
-- receipt is answered 'pruned' and changes nothing.
ALTER TABLE flows ADD COLUMN pruned_through INTEGER NOT NULL DEFAULT 0 CHECK (pruned_through >= 0);
