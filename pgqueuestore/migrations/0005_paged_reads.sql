-- pgqueuestore migration 5: the console's paged reads (queue.Pager, page.go;
-- docs/decisions/postgres-paged-reads.md), with queuestore's index names:
-- flows in two orders of FlowsPage, (sort key, flow), the key expressions
-- written exactly as page.go's sortKeys (PostgreSQL uses an expression index
-- only for the same expression); one event's audit rows by id (AuditPage with
-- an EventID). The order by backlog has no index here (queuestore's
-- flows_by_backlog): it would read last_seq, so an enqueue onto a flow with a
-- backlog would no longer be a heap-only update.
CREATE INDEX flows_by_served ON {s}.flows ((-served), flow);
CREATE INDEX flows_by_blocked ON {s}.flows ((CASE WHEN head_seq IS NULL THEN 3 WHEN ready_at IS NULL THEN 0 WHEN NOT ready THEN 1 ELSE 2 END), flow);
CREATE INDEX audit_event ON {s}.audit (event_id, id) WHERE event_id IS NOT NULL;
