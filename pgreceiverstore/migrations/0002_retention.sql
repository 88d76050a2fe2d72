-- pgreceiverstore migration 2: retention of receipts (docs/contract.md §7.9),
-- as receiverstore's migration 2. "{s}" is the quoted schema name. Like every
-- migration file it never changes once released
-- (docs/decisions/migrations.md).

-- receipts.accepted_at: the wall-clock time the receipt was accepted (the
-- store's clock, WithNow). Receipts of an older schema get the migration's
-- time (now() is the transaction's start, stored once, no table rewrite): a
-- receipt is never pruned earlier than its retention window allows, only
-- later. The default is dropped again: every insert names the time.
ALTER TABLE {s}.receipts ADD COLUMN accepted_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE {s}.receipts ALTER COLUMN accepted_at DROP DEFAULT;

-- Prune and Prunable find the oldest receipts through this index, never by
-- scanning receipts.
CREATE INDEX receipts_accepted_at ON {s}.receipts (accepted_at);

-- flows.pruned_through: the highest seq of the flow whose receipt Prune
-- deleted; 0 before any. A later message of the flow at or below it with no
-- receipt is answered 'pruned' and changes nothing.
ALTER TABLE {s}.flows ADD COLUMN pruned_through bigint NOT NULL DEFAULT 0 CHECK (pruned_through >= 0);
