-- The event log, consumer checkpoints and projection snapshots.
-- seq is the row id: gap-free from 1 (rows are never deleted; the writer assigns seq = last + 1).
-- idem_key is NULL for events without an idempotency key; a non-NULL key appears at most once.
CREATE TABLE events (
    seq      INTEGER PRIMARY KEY,
    type     TEXT    NOT NULL,
    v        INTEGER NOT NULL,
    at_ms    INTEGER,
    idem_key TEXT    UNIQUE,
    body     BLOB    NOT NULL
) STRICT;

-- Keyset reads of one or a few event types (seq order within a type).
CREATE INDEX events_type_seq ON events (type, seq);

-- The last seq each consumer has fully processed.
CREATE TABLE checkpoints (
    consumer TEXT    PRIMARY KEY,
    seq      INTEGER NOT NULL CHECK (seq >= 0)
) STRICT;

-- The encoded state of a projection as of log position seq.
CREATE TABLE snapshots (
    name TEXT    NOT NULL,
    seq  INTEGER NOT NULL CHECK (seq >= 0),
    data BLOB    NOT NULL,
    PRIMARY KEY (name, seq)
) STRICT;
