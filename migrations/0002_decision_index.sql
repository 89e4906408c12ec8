-- Decisions looked up by job, pod, queue, node or cycle (GET /v1/decisions, GET /v1/jobs/...).
-- One row per decision event (every event that carries a cycle number), written in the same
-- transaction as the event itself by the log's writer (store/index.py says which fields).
-- NULL where the decision does not name that thing (a CycleOpened names no job).
CREATE TABLE decision_index (
    seq       INTEGER PRIMARY KEY,
    cycle     INTEGER NOT NULL,
    type      TEXT    NOT NULL,
    job       TEXT,
    namespace TEXT,
    pod       TEXT,
    queue     TEXT,
    node      TEXT
) STRICT;

CREATE INDEX decision_index_job ON decision_index (job, seq) WHERE job IS NOT NULL;
CREATE INDEX decision_index_pod ON decision_index (namespace, pod, seq) WHERE pod IS NOT NULL;
CREATE INDEX decision_index_queue ON decision_index (queue, seq) WHERE queue IS NOT NULL;
CREATE INDEX decision_index_node ON decision_index (node, seq) WHERE node IS NOT NULL;
CREATE INDEX decision_index_cycle ON decision_index (cycle, seq);

-- 0 until the decisions already in the log when this migration ran have been indexed
-- (store/index.py backfill_index, run by store/migrate.py right after the migrations).
CREATE TABLE decision_index_state (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    backfilled INTEGER NOT NULL
) STRICT;
INSERT INTO decision_index_state (id, backfilled) VALUES (1, 0);
