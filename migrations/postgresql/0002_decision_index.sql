-- PostgreSQL dialect of 0002: decisions looked up by job, pod, queue, node or cycle, one row per
-- decision event, written in the same transaction as the event (store/index.py says which fields).
CREATE TABLE decision_index (
    seq       BIGINT PRIMARY KEY,
    cycle     BIGINT NOT NULL,
    type      TEXT   NOT NULL,
    job       TEXT,
    namespace TEXT,
    pod       TEXT,
    queue     TEXT,
    node      TEXT
);

CREATE INDEX decision_index_job ON decision_index (job, seq) WHERE job IS NOT NULL;
CREATE INDEX decision_index_pod ON decision_index (namespace, pod, seq) WHERE pod IS NOT NULL;
CREATE INDEX decision_index_queue ON decision_index (queue, seq) WHERE queue IS NOT NULL;
CREATE INDEX decision_index_node ON decision_index (node, seq) WHERE node IS NOT NULL;
CREATE INDEX decision_index_cycle ON decision_index (cycle, seq);

-- A PostgreSQL log is indexed from its first event: nothing to backfill.
CREATE TABLE decision_index_state (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    backfilled INTEGER NOT NULL
);
INSERT INTO decision_index_state (id, backfilled) VALUES (1, 1);
