-- A cycle's decisions by seq span instead of a (cycle, seq) index on every decision row.
-- A cycle is written in one append, so its decisions are contiguous in seq: one row per cycle
-- (the first and last seq of its decision-index rows), kept by the log's writer in the same
-- transaction as the events (store/index.py).  GET /v1/decisions?cycle= and /v1/cycles/{id}
-- read decision_index rows with seq BETWEEN first_seq AND last_seq AND cycle = ?, which stays
-- exact even if a cycle's span ever held other rows.
CREATE TABLE decision_cycles (
    cycle     INTEGER PRIMARY KEY,
    first_seq INTEGER NOT NULL,
    last_seq  INTEGER NOT NULL,
    CHECK (first_seq <= last_seq)
) STRICT;

INSERT INTO decision_cycles (cycle, first_seq, last_seq)
SELECT cycle, min(seq), max(seq) FROM decision_index GROUP BY cycle;

DROP INDEX decision_index_cycle;
