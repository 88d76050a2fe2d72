-- data_v7.sql: data_v6.sql for a version-7 queue schema (oldBuild): the same rows, with
-- each flow's sequence counter (flow_seqs) and a-1's ack tick (acked_at,
-- and its row in acked), as the version-7 build wrote them. "{s}" stands
-- for the schema.
INSERT INTO {s}.meta (id, clock_mark, ticket, lease, max_attempts, backoff_base, backoff_cap, jitter, fairness, vnow, vtail, joins)
VALUES (1, 20, 5, 5, 3, 2, 8, false, 'min_served', 0, 0, 0);
INSERT INTO {s}.flows (flow, last_seq, served, head_seq, ready_at, ready, weight, pass, joined, head_enqueued_at) VALUES
    ('a', 3, 2, 2, 25, false, 1, 0, 0, 2),
    ('b', 1, 2, 1, NULL, false, 1, 0, 0, 4),
    ('c', 1, 1, 1, 19, true, 1, 0, 0, 5),
    ('d', 1, 0, 1, 5, false, 1, 0, 0, 5);
INSERT INTO {s}.flow_seqs (flow, last_seq) SELECT flow, last_seq FROM {s}.flows;
INSERT INTO {s}.events (id, flow, seq, body, state, generation, attempts, lifetime_attempts, available_at, lease_until, ticket, reason, enqueued_at, acked_at) VALUES
    ('a-1', 'a', 1, '{"n":1}', 'acked', 1, 1, 1, 1, 0, 1, '', 1, 3),
    ('a-2', 'a', 2, '{"n":2}', 'inflight', 1, 1, 1, 2, 25, 5, '', 2, NULL),
    ('a-3', 'a', 3, '{"n":3}', 'pending', 0, 0, 0, 3, 0, 0, '', 3, NULL),
    ('b-1', 'b', 1, '{"n":4}', 'quarantined', 3, 1, 2, 4, 0, 4, 'unavailable', 4, NULL),
    ('c-1', 'c', 1, '{"n":5}', 'pending', 1, 1, 1, 19, 0, 3, 'timeout', 5, NULL),
    ('d-1', 'd', 1, '{"n":6}', 'pending', 0, 0, 0, 5, 0, 0, '', 5, NULL);
INSERT INTO {s}.acked (at, event_id) VALUES (3, 'a-1');
INSERT INTO {s}.audit (id, kind, event_id, generation, reason, detail, at) VALUES
    (1, 'redrive', 'b-1', 2, 'retry it', NULL, 10),
    (2, 'weight', NULL, NULL, 'back to normal', '{"flow":"c","old":2,"new":1}', 11),
    (3, 'policy', NULL, NULL, 'shorter lease', '{"old":{"lease":6,"max_attempts":3,"backoff_base":2,"backoff_cap":8,"jitter":false,"fairness":"min_served"},"new":{"lease":5,"max_attempts":3,"backoff_base":2,"backoff_cap":8,"jitter":false,"fairness":"min_served"}}', 12);
