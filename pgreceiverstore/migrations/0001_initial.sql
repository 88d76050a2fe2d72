-- pgreceiverstore migration 1: the receiverstore tables, one for one.
-- "{s}" is the quoted schema name, put in by Open. Text columns are
-- COLLATE "C": every comparison and order is byte order, as SQLite's BINARY
-- collation. Like every migration file it never changes once released
-- (docs/decisions/migrations.md).
CREATE TABLE {s}.flows (
    flow          text COLLATE "C" NOT NULL PRIMARY KEY,
    next_expected bigint NOT NULL CHECK (next_expected >= 2),
    total         bigint NOT NULL CHECK (total >= 1)
);
CREATE TABLE {s}.receipts (
    id    text COLLATE "C" NOT NULL PRIMARY KEY,
    flow  text COLLATE "C" NOT NULL REFERENCES {s}.flows (flow) DEFERRABLE INITIALLY DEFERRED,
    seq   bigint NOT NULL CHECK (seq >= 1),
    body  bytea  NOT NULL,
    delta bigint NOT NULL CHECK (delta BETWEEN 1 AND 1000),
    UNIQUE (flow, seq)
);
CREATE TABLE {s}.conflicts (
    id            text COLLATE "C" NOT NULL,
    flow          text COLLATE "C" NOT NULL,
    seq           bigint NOT NULL CHECK (seq >= 1),
    body          bytea  NOT NULL,
    rule          text COLLATE "C" NOT NULL CHECK (rule IN ('id_reused', 'seq_taken', 'seq_behind')),
    with_id       text COLLATE "C" NOT NULL,
    with_flow     text COLLATE "C" NOT NULL,
    with_seq      bigint NOT NULL,
    next_expected bigint NOT NULL,
    CHECK ((rule = 'seq_behind') = (with_id = '')),
    CHECK ((rule = 'seq_behind') = (next_expected >= 2)),
    UNIQUE (id, flow, seq, body)
);
