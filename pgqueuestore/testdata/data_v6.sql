-- data.sql for a version-6 queue schema (oldBuild): the same rows, each
-- flow with the enqueue tick of its head (head_enqueued_at, migration 6),
-- as the version-6 build wrote them. From data.sql: the meta row
-- with the default policy, after a SetPolicy back from lease 6, a weight
-- changed back to 1, and events in every state: a-1 acked, a-2 in flight
-- (lease until 25), a-3 pending behind it, b-1 quarantined after a redrive,
-- c-1 pending after a failed attempt, d-1 never claimed. "{s}" stands for
-- the schema.
INSERT INTO {s}.meta (id, clock_mark, ticket, lease, max_attempts, backoff_base, backoff_cap, jitter, fairness, vnow, vtail, joins)
VALUES (1, 20, 5, 5, 3, 2, 8, false, 'min_served', 0, 0, 0);
INSERT INTO {s}.flows (flow, last_seq, served, head_seq, ready_at, ready, weight, pass, joined, head_enqueued_at) VALUES
    ('a', 3, 2, 2, 25, false, 1, 0, 0, 2),
    ('b', 1, 2, 1, NULL, false, 1, 0, 0, 4),
    ('c', 1, 1, 1, 19, true, 1, 0, 0, 5),
    ('d', 1, 0, 1, 5, false, 1, 0, 0, 5);
INSERT INTO {s}.events (id, flow, seq, body, state, generation, attempts, lifetime_attempts, available_at, lease_until, ticket, reason, enqueued_at) VALUES
    ('a-1', 'a', 1, '{"n":1}', 'acked', 1, 1, 1, 1, 0, 1, '', 1),
    ('a-2', 'a', 2, '{"n":2}', 'inflight', 1, 1, 1, 2, 25, 5, '', 2),
    ('a-3', 'a', 3, '{"n":3}', 'pending', 0, 0, 0, 3, 0, 0, '', 3),
    ('b-1', 'b', 1, '{"n":4}', 'quarantined', 3, 1, 2, 4, 0, 4, 'unavailable', 4),
    ('c-1', 'c', 1, '{"n":5}', 'pending', 1, 1, 1, 19, 0, 3, 'timeout', 5),
    ('d-1', 'd', 1, '{"n":6}', 'pending', 0, 0, 0, 5, 0, 0, '', 5);
INSERT INTO {s}.audit (id, kind, event_id, generation, reason, detail, at) VALUES
    (1, 'redrive', 'b-1', 2, 'retry it', NULL, 10),
    (2, 'weight', NULL, NULL, 'back to normal', '{"flow":"c","old":2,"new":1}', 11),
    (3, 'policy', NULL, NULL, 'shorter lease', '{"old":{"lease":6,"max_attempts":3,"backoff_base":2,"backoff_cap":8,"jitter":false,"fairness":"min_served"},"new":{"lease":5,"max_attempts":3,"backoff_base":2,"backoff_cap":8,"jitter":false,"fairness":"min_served"}}', 12);
