-- A version-4 queue schema exactly as the version-4 build (commit 8f63115)
-- made it: the statements its Open ran in a new schema, in order, with its
-- migration texts, "{s}" standing for the schema. The migration tests run
-- it, then data.sql, in a schema of their own.
CREATE TABLE {s}.schema_migrations (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE {s}.meta (
    id           integer PRIMARY KEY CHECK (id = 1),
    clock_mark   bigint NOT NULL CHECK (clock_mark >= 0),
    ticket       bigint NOT NULL CHECK (ticket >= 0),
    lease        bigint NOT NULL CHECK (lease > 0),
    max_attempts integer NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
    backoff_base bigint NOT NULL CHECK (backoff_base > 0),
    backoff_cap  bigint NOT NULL CHECK (backoff_cap >= backoff_base),
    jitter       boolean NOT NULL,
    fairness     text COLLATE "C" NOT NULL CHECK (fairness IN ('min_served', 'rotation')),
    vnow         bigint NOT NULL DEFAULT 0,
    vtail        bigint NOT NULL DEFAULT 0,
    joins        bigint NOT NULL DEFAULT 0
);
CREATE TABLE {s}.flows (
    flow     text COLLATE "C" PRIMARY KEY,
    last_seq bigint NOT NULL CHECK (last_seq >= 1),
    served   bigint NOT NULL CHECK (served >= 0),
    head_seq bigint CHECK (head_seq BETWEEN 1 AND last_seq),
    ready_at bigint,
    ready    boolean NOT NULL,
    weight   integer NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
    pass     bigint NOT NULL DEFAULT 0,
    joined   bigint NOT NULL DEFAULT 0,
    CHECK (ready_at IS NULL OR head_seq IS NOT NULL),
    CHECK (NOT ready OR ready_at IS NOT NULL)
);
CREATE INDEX flows_waiting ON {s}.flows (ready_at) WHERE NOT ready;
CREATE INDEX flows_ready ON {s}.flows (served, flow) WHERE ready;
CREATE TABLE {s}.events (
    id                text COLLATE "C" PRIMARY KEY,
    flow              text COLLATE "C" NOT NULL REFERENCES {s}.flows (flow),
    seq               bigint NOT NULL CHECK (seq >= 1),
    body              bytea NOT NULL CHECK (length(body) >= 1),
    state             text COLLATE "C" NOT NULL
                      CHECK (state IN ('pending', 'inflight', 'acked', 'quarantined')),
    generation        bigint NOT NULL CHECK (generation >= attempts),
    attempts          integer NOT NULL CHECK (attempts >= 0),
    lifetime_attempts bigint NOT NULL CHECK (lifetime_attempts >= attempts),
    available_at      bigint NOT NULL CHECK (available_at >= 0),
    lease_until       bigint NOT NULL CHECK ((state = 'inflight') = (lease_until > 0)),
    ticket            bigint NOT NULL CHECK (ticket >= 0),
    reason            text COLLATE "C" NOT NULL CHECK (state <> 'quarantined' OR reason <> ''),
    enqueued_at       bigint NOT NULL CHECK (enqueued_at >= 0),
    CHECK (state <> 'inflight' OR attempts >= 1),
    UNIQUE (flow, seq)
);
CREATE INDEX events_quarantined ON {s}.events (flow, seq) WHERE state = 'quarantined';
CREATE INDEX events_quarantined_reason ON {s}.events (reason, flow, seq) WHERE state = 'quarantined';
CREATE TABLE {s}.audit (
    id         bigint PRIMARY KEY,
    kind       text COLLATE "C" NOT NULL DEFAULT 'redrive' CHECK (kind IN ('redrive', 'policy', 'weight')),
    event_id   text COLLATE "C" REFERENCES {s}.events (id),
    generation bigint CHECK (generation >= 1),
    reason     text COLLATE "C" NOT NULL CHECK (reason <> ''),
    detail     text,
    at         bigint NOT NULL CHECK (at >= 0),
    CHECK ((kind = 'redrive') = (event_id IS NOT NULL AND generation IS NOT NULL)),
    CHECK ((kind = 'redrive') = (detail IS NULL))
);
INSERT INTO {s}.schema_migrations (version) VALUES (1);
CREATE INDEX flows_rotation ON {s}.flows (pass, joined) WHERE ready;
INSERT INTO {s}.schema_migrations (version) VALUES (2);
CREATE INDEX flows_ready_due ON {s}.flows (ready_at) WHERE ready;
INSERT INTO {s}.schema_migrations (version) VALUES (3);
ALTER TABLE {s}.events ADD COLUMN quarantined boolean NOT NULL
    GENERATED ALWAYS AS (state = 'quarantined') STORED;
DROP INDEX {s}.events_quarantined;
DROP INDEX {s}.events_quarantined_reason;
CREATE INDEX events_quarantined ON {s}.events (flow, seq) WHERE quarantined;
CREATE INDEX events_quarantined_reason ON {s}.events (reason, flow, seq) WHERE quarantined;
ALTER TABLE {s}.events SET (fillfactor = 70);
ALTER TABLE {s}.events DROP CONSTRAINT events_flow_fkey;
CREATE FUNCTION {s}.events_flow_exists() RETURNS trigger LANGUAGE plpgsql
SET search_path = {s}, pg_temp AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM inserted AS n
               WHERE NOT EXISTS (SELECT 1 FROM flows AS f WHERE f.flow = n.flow)) THEN
        RAISE foreign_key_violation USING MESSAGE = 'insert into events: the event''s flow is not in flows';
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER events_flow_exists AFTER INSERT ON {s}.events REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION {s}.events_flow_exists();
INSERT INTO {s}.schema_migrations (version) VALUES (4);
