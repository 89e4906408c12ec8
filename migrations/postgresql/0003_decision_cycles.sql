-- PostgreSQL dialect of 0003: a cycle's decisions by seq span (one row per cycle).
CREATE TABLE decision_cycles (
    cycle     BIGINT PRIMARY KEY,
    first_seq BIGINT NOT NULL,
    last_seq  BIGINT NOT NULL,
    CHECK (first_seq <= last_seq)
);

INSERT INTO decision_cycles (cycle, first_seq, last_seq)
SELECT cycle, min(seq), max(seq) FROM decision_index GROUP BY cycle;

DROP INDEX decision_index_cycle;
