-- pgqueuestore migration 9: shards (docs/contract.md §7.10).
-- meta records the store's shard label: its index, the shard count of its
-- set and the set's epoch; all three NULL for a store never labeled (a
-- queue that is not sharded). The label is written once (SetShardLabel)
-- and never changed in place.
ALTER TABLE {s}.meta ADD COLUMN shard_index integer CHECK (shard_index >= 0);
ALTER TABLE {s}.meta ADD COLUMN shard_count integer CHECK (shard_count BETWEEN 1 AND 256);
ALTER TABLE {s}.meta ADD COLUMN shard_epoch bigint CHECK (shard_epoch >= 0);
ALTER TABLE {s}.meta ADD CONSTRAINT meta_shard_label_whole
    CHECK ((shard_index IS NULL) = (shard_count IS NULL) AND (shard_count IS NULL) = (shard_epoch IS NULL)
        AND (shard_index IS NULL OR shard_index < shard_count));
-- audit gets the kind 'shard' (SetShardLabel, and a reshard's import of
-- queue-wide rows).
ALTER TABLE {s}.audit DROP CONSTRAINT audit_kind_check;
ALTER TABLE {s}.audit ADD CONSTRAINT audit_kind_check
    CHECK (kind IN ('redrive', 'policy', 'weight', 'pause', 'resume',
        'destination', 'destination_pause', 'destination_resume', 'flow_destination', 'shard'));
-- audit_flow finds the rows about one flow (weight, pause, resume,
-- flow_destination: their detail names the flow), for ExportFlow: one
-- range of the index per flow, never a scan of the audit.
CREATE INDEX audit_flow ON {s}.audit (((detail::jsonb) ->> 'flow'), id) WHERE detail IS NOT NULL;
