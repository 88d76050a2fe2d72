-- pgqueuestore migration 2: the rotation order (docs/contract.md §7.6). Its
-- columns (meta's vnow, vtail, joins; flows' weight, pass, joined) came with
-- migration 1 at their defaults, so an existing queue keeps the default
-- policy (min_served) and every flow weight 1; what version 2 adds is the
-- index of the rotation's pick, ready flows in (pass, joined) order
-- (queuestore's flows_rotation). It is kept under every policy, so that
-- SetPolicy never runs DDL: see docs/decisions/rotation-in-sql.md.
CREATE INDEX flows_rotation ON {s}.flows (pass, joined) WHERE ready;
