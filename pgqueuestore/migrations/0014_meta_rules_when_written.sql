-- pgqueuestore migration 14: meta's rules on the policy and the shard
-- label are checked when a statement writes the columns they read, not at
-- every write turn (docs/decisions/postgres-check-constraints.md).
-- PostgreSQL prepares every CHECK of a table again for each UPDATE that
-- writes a row of it, whichever columns the UPDATE sets: meta's fifteen
-- took about 55 µs of every UPDATE of its clock or its ticket, which every
-- claim makes. The trigger below checks the same thirteen rules, raising
-- check_violation (SQLSTATE 23514) with the constraint's name, and fires
-- on an INSERT or on an UPDATE that sets one of the columns they read;
-- the clock and the ticket keep their CHECKs. A later migration that adds
-- a column to meta with a rule replaces meta_rules with a body that checks
-- it too and recreates the trigger with the column in its list
-- (TestMetaRules fails on a CHECK added to meta instead).
ALTER TABLE {s}.meta
    DROP CONSTRAINT meta_id_check,
    DROP CONSTRAINT meta_lease_check,
    DROP CONSTRAINT meta_max_attempts_check,
    DROP CONSTRAINT meta_backoff_base_check,
    DROP CONSTRAINT meta_check,
    DROP CONSTRAINT meta_fairness_check,
    DROP CONSTRAINT meta_check1,
    DROP CONSTRAINT meta_retry_after_cap_check,
    DROP CONSTRAINT meta_retention_check,
    DROP CONSTRAINT meta_shard_index_check,
    DROP CONSTRAINT meta_shard_count_check,
    DROP CONSTRAINT meta_shard_epoch_check,
    DROP CONSTRAINT meta_shard_label_whole;
-- A rule holds unless it is false, as a CHECK does: IF NOT NULL raises
-- nothing.
CREATE FUNCTION {s}.meta_rules() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (NEW.id = 1) THEN
        RAISE check_violation USING MESSAGE = 'meta: id is not 1', CONSTRAINT = 'meta_id_check';
    END IF;
    IF NOT (NEW.lease > 0) THEN
        RAISE check_violation USING MESSAGE = 'meta: lease is not positive', CONSTRAINT = 'meta_lease_check';
    END IF;
    IF NOT (NEW.max_attempts BETWEEN 1 AND 100) THEN
        RAISE check_violation USING MESSAGE = 'meta: max_attempts is outside 1 to 100', CONSTRAINT = 'meta_max_attempts_check';
    END IF;
    IF NOT (NEW.backoff_base > 0) THEN
        RAISE check_violation USING MESSAGE = 'meta: backoff_base is not positive', CONSTRAINT = 'meta_backoff_base_check';
    END IF;
    IF NOT (NEW.backoff_cap >= NEW.backoff_base) THEN
        RAISE check_violation USING MESSAGE = 'meta: backoff_cap is below backoff_base', CONSTRAINT = 'meta_check';
    END IF;
    IF NOT (NEW.fairness IN ('min_served', 'rotation')) THEN
        RAISE check_violation USING MESSAGE = 'meta: fairness is neither min_served nor rotation', CONSTRAINT = 'meta_fairness_check';
    END IF;
    IF NOT (cardinality(NEW.schedule) = 0 OR (
            array_ndims(NEW.schedule) = 1 AND array_lower(NEW.schedule, 1) = 1
            AND cardinality(NEW.schedule) <= 99
            AND array_position(NEW.schedule, NULL) IS NULL
            AND 1 <= ALL (NEW.schedule)
            AND NEW.max_attempts = cardinality(NEW.schedule) + 1)) THEN
        RAISE check_violation USING MESSAGE = 'meta: schedule is not a list of waits of at least 1, one fewer than max_attempts', CONSTRAINT = 'meta_check1';
    END IF;
    IF NOT (NEW.retry_after_cap >= 0) THEN
        RAISE check_violation USING MESSAGE = 'meta: retry_after_cap is negative', CONSTRAINT = 'meta_retry_after_cap_check';
    END IF;
    IF NOT (NEW.retention >= 0) THEN
        RAISE check_violation USING MESSAGE = 'meta: retention is negative', CONSTRAINT = 'meta_retention_check';
    END IF;
    IF NOT (NEW.shard_index >= 0) THEN
        RAISE check_violation USING MESSAGE = 'meta: shard_index is negative', CONSTRAINT = 'meta_shard_index_check';
    END IF;
    IF NOT (NEW.shard_count BETWEEN 1 AND 256) THEN
        RAISE check_violation USING MESSAGE = 'meta: shard_count is outside 1 to 256', CONSTRAINT = 'meta_shard_count_check';
    END IF;
    IF NOT (NEW.shard_epoch >= 0) THEN
        RAISE check_violation USING MESSAGE = 'meta: shard_epoch is negative', CONSTRAINT = 'meta_shard_epoch_check';
    END IF;
    IF NOT ((NEW.shard_index IS NULL) = (NEW.shard_count IS NULL)
            AND (NEW.shard_count IS NULL) = (NEW.shard_epoch IS NULL)
            AND (NEW.shard_index IS NULL OR NEW.shard_index < NEW.shard_count)) THEN
        RAISE check_violation USING MESSAGE = 'meta: the shard label is not whole', CONSTRAINT = 'meta_shard_label_whole';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER meta_rules BEFORE INSERT OR UPDATE OF id, lease, max_attempts, backoff_base, backoff_cap,
        fairness, schedule, retry_after_cap, retention, shard_index, shard_count, shard_epoch
    ON {s}.meta FOR EACH ROW EXECUTE FUNCTION {s}.meta_rules();
