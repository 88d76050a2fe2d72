-- pgqueuestore migration 10: the operator's sorted pages leave the claim
-- path (docs/decisions/operator-reads-off-the-claim-path.md). Every claim
-- and settle added an entry to both of migration 5's flows indexes (an
-- update of flows is never heap-only on that path); the served and blocked
-- pages now read the flows and keep the first Limit+1, as the backlog page
-- always did (page.go).
DROP INDEX {s}.flows_by_served;
DROP INDEX {s}.flows_by_blocked;
