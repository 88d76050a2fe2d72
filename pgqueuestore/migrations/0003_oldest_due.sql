-- pgqueuestore migration 3: OldestDue's index, the flows marked ready in due
-- order (queuestore's flows_ready_due): the first entry is the
-- longest-waiting ready head, found without reading every ready flow.
CREATE INDEX flows_ready_due ON {s}.flows (ready_at) WHERE ready;
