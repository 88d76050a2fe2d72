-- pgqueuestore migration 12: flows_rotation holds the flows that have
-- joined the rotation, not every ready flow
-- (docs/decisions/rotation-in-sql.md). Under min_served no statement writes
-- pass or joined, so every ready flow had an entry of the same key (dest,
-- 0, 0), written at every transition to ready and never read: about 5 % of
-- a min_served queue's batched cycle. A flow joins the rotation with a
-- join number of 1 or more (an enqueue that gives it a head under
-- rotation, the switch to rotation for every flow with a head, an import),
-- so under rotation every flow with a head, ready ones included, has
-- joined > 0; the rotation's picks say so, and find the index.
DROP INDEX {s}.flows_rotation;
CREATE INDEX flows_rotation ON {s}.flows (dest, pass, joined) WHERE ready AND joined > 0;
