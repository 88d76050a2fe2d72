-- pgqueuestore migration 8: destinations (docs/contract.md §7.11;
-- docs/decisions/postgres-destinations.md). A queue registers
-- destinations (name, URL, secrets, a concurrency and a rate limit, a
-- pause) and each flow delivers to one of them, '' being the default
-- destination, which is never registered.
--
-- destinations keeps each one's token bucket for its rate limit: tokens in
-- milli-tokens (a claim costs 1000), full (rate * 1000) when registered,
-- refilled by (tick - refilled_at) * rate, capped, when a claim spends
-- from it.
CREATE TABLE {s}.destinations (
    name        text COLLATE "C" PRIMARY KEY CHECK (name <> ''),
    url         text COLLATE "C" NOT NULL CHECK (url <> ''),
    secrets     text[] NOT NULL CHECK (cardinality(secrets) BETWEEN 1 AND 4),
    concurrency integer NOT NULL CHECK (concurrency >= 0),
    rate        integer NOT NULL CHECK (rate >= 0),
    paused      text COLLATE "C" CHECK (paused <> ''),
    tokens      bigint NOT NULL CHECK (tokens >= 0),
    refilled_at bigint NOT NULL CHECK (refilled_at >= 0)
);
-- A flow's destination, named by its first event. flow_seqs, which every
-- enqueue locks first (plain or in a caller's transaction), keeps the same
-- name, so that an enqueue in a caller's transaction checks it without
-- reading flows (which the store's write turns update) and the promotion
-- of its arrivals gives a new flows row its destination.
ALTER TABLE {s}.flows ADD COLUMN dest text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE {s}.flow_seqs ADD COLUMN dest text COLLATE "C" NOT NULL DEFAULT '';
-- An event's destination as of its latest claim (written by the claim,
-- '' until then and for the default destination), and the two generated
-- columns of the index that counts a destination's unexpired leases: NULL
-- unless the event is in flight to a registered destination. A claim or
-- an ack of a default-destination event leaves them NULL, so it stays a
-- heap-only update (docs/decisions/postgres-hot-updates.md); an index that
-- read state or lease_until itself would cost every claim and ack its
-- heap-only update.
ALTER TABLE {s}.events ADD COLUMN dest text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN inflight_dest text COLLATE "C"
        GENERATED ALWAYS AS (CASE WHEN state = 'inflight' AND dest <> '' THEN dest END) STORED,
    ADD COLUMN inflight_lease bigint
        GENERATED ALWAYS AS (CASE WHEN state = 'inflight' AND dest <> '' THEN lease_until END) STORED;
CREATE INDEX events_inflight_dest ON {s}.events (inflight_dest, inflight_lease) WHERE inflight_dest IS NOT NULL;
-- The claim's indexes, destination first: one range per destination, in
-- MinServed order (served, flow) or the rotation's (pass, joined). They
-- replace the old ones, so a flow's write touches as many entries as
-- before; with no destination registered the claim reads the '' range.
DROP INDEX {s}.flows_ready;
CREATE INDEX flows_ready ON {s}.flows (dest, served, flow) WHERE ready;
DROP INDEX {s}.flows_rotation;
CREATE INDEX flows_rotation ON {s}.flows (dest, pass, joined) WHERE ready;
-- The operator's read of a destination's flows (Destinations: Flows,
-- Backlog). Flows of the default destination are not in it.
CREATE INDEX flows_dest ON {s}.flows (dest, flow) WHERE dest <> '';
ALTER TABLE {s}.audit DROP CONSTRAINT audit_kind_check;
ALTER TABLE {s}.audit ADD CONSTRAINT audit_kind_check
    CHECK (kind IN ('redrive', 'policy', 'weight', 'pause', 'resume',
        'destination', 'destination_pause', 'destination_resume', 'flow_destination'));
