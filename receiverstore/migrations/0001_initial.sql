-- receiverstore migration 1: the schema of version 1, as released. Like every
-- migration file it never changes once released (docs/decisions/migrations.md);
-- Open runs it on a new file in one IMMEDIATE transaction and records
-- PRAGMA user_version = 1.

-- flows: one row per flow that has accepted at least one message.
-- A flow without a row has next_expected 1 and total 0.
CREATE TABLE IF NOT EXISTS flows (
    flow          TEXT    NOT NULL PRIMARY KEY,
    next_expected INTEGER NOT NULL CHECK (next_expected >= 2),
    total         INTEGER NOT NULL CHECK (total >= 1)
) STRICT;

-- receipts: one row per accepted message, kept forever. A receipt exists
-- only for a message whose effect (total += delta) was applied in the same
-- transaction.
CREATE TABLE IF NOT EXISTS receipts (
    id    TEXT    NOT NULL PRIMARY KEY,
    flow  TEXT    NOT NULL REFERENCES flows (flow) DEFERRABLE INITIALLY DEFERRED,
    seq   INTEGER NOT NULL CHECK (seq >= 1),
    body  BLOB    NOT NULL,
    delta INTEGER NOT NULL CHECK (delta BETWEEN 1 AND 1000),
    UNIQUE (flow, seq)
) STRICT;

-- conflicts: each distinct conflicting message (id, flow, seq, body) once,
-- with what it conflicted with. Never resolved, never deleted.
--   rule 'id_reused'  (SPEC 3 rule 1): the receipt with this id has another
--                     flow, seq or body; with_* name that receipt.
--   rule 'seq_taken'  (rule 2): (flow, seq) has a receipt under another id;
--                     with_* name that receipt.
--   rule 'seq_behind' (rule 4): seq is below the flow's next expected number
--                     and has no receipt; next_expected records that number.
CREATE TABLE IF NOT EXISTS conflicts (
    id            TEXT    NOT NULL,
    flow          TEXT    NOT NULL,
    seq           INTEGER NOT NULL CHECK (seq >= 1),
    body          BLOB    NOT NULL,
    rule          TEXT    NOT NULL CHECK (rule IN ('id_reused', 'seq_taken', 'seq_behind')),
    with_id       TEXT    NOT NULL,
    with_flow     TEXT    NOT NULL,
    with_seq      INTEGER NOT NULL,
    next_expected INTEGER NOT NULL,
    CHECK ((rule = 'seq_behind') = (with_id = '')),
    CHECK ((rule = 'seq_behind') = (next_expected >= 2)),
    UNIQUE (id, flow, seq, body)
) STRICT;
