-- pgreceiverstore migration 5: Prune takes receipts accepted at the same
-- time in order of their flow (byte order: the column is COLLATE "C"),
-- then their seq, as receiverstore's migration 3 makes it there, so that
-- one batch deletes the same receipts on both stores (docs/contract.md
-- §7.9). The index had accepted_at alone, whose ties came in no stated
-- order; ordering them otherwise would sort every tied receipt. "{s}" is
-- the quoted schema name. The index is built in the migration's
-- transaction: receives wait for it. Like every migration file it never
-- changes once released (docs/decisions/migrations.md).
DROP INDEX {s}.receipts_accepted_at;
CREATE INDEX receipts_accepted_at ON {s}.receipts (accepted_at, flow, seq);
