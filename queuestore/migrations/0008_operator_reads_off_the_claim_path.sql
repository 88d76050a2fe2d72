-- queuestore migration 8 (schema version 7 -> 8): the operator's sorted
-- pages leave the claim path (docs/decisions/operator-reads-off-the-claim-path.md).
--
-- The console's backlog, served and blocked orders had an expression index
-- each. Every enqueue, claim and ack rewrote an entry in one or more of
-- them (SQLite updates an index whenever a statement sets one of its
-- columns), about a quarter of the WAL frames of an event's queue writes.
-- Those pages now read the flows and keep the first Limit+1 (page.go); the
-- page by name, OldestWaiting's flows_head_enqueued and the claim's indexes
-- stay.
DROP INDEX flows_by_backlog;
DROP INDEX flows_by_served;
DROP INDEX flows_by_blocked;

-- flows_waiting (ready = 0) and flows_ready_due (ready = 1) become one index
-- on the same columns: every claim, and every enqueue into a flow without
-- a head, moved a flow's entry from one to the other, two B-trees, where
-- one index moves it within one (a single page while a queue's flows fit
-- in one). The promotion, NextDue and OldestDue read its two ranges.
DROP INDEX flows_waiting;
DROP INDEX flows_ready_due;
CREATE INDEX flows_due ON flows (ready, ready_at);
