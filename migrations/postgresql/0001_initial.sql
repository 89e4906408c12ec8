-- PostgreSQL dialect of 0001: the event log, consumer checkpoints and projection snapshots,
-- plus what a log shared by several replicas needs (store/postgres.py):
--   log_head    one row holding the last seq; the append transaction locks it (SELECT … FOR UPDATE),
--               writes seq = last + 1 … and updates it, so appenders are serialised, a rolled-back
--               append gives its numbers back (a SEQUENCE would leave a gap) and a reader never sees
--               seq N before every seq below N has committed.
--   leadership  one row: the current leader's epoch, holder and lease expiry (database clock).
--   leader_terms  every leadership term: its epoch, holder, start and the log position it began at.
-- Every event row carries the epoch of the leader that wrote it (0 before any leader); a statement
-- trigger refuses rows whose epoch is not the current one once a leader has been elected (fencing).
CREATE TABLE events (
    seq      BIGINT  PRIMARY KEY,
    type     TEXT    NOT NULL,
    v        INTEGER NOT NULL,
    at_ms    BIGINT,
    idem_key TEXT    UNIQUE,
    body     BYTEA   NOT NULL,
    epoch    BIGINT  NOT NULL DEFAULT 0
);

CREATE INDEX events_type_seq ON events (type, seq);

CREATE TABLE checkpoints (
    consumer TEXT   PRIMARY KEY,
    seq      BIGINT NOT NULL CHECK (seq >= 0)
);

CREATE TABLE snapshots (
    name TEXT   NOT NULL,
    seq  BIGINT NOT NULL CHECK (seq >= 0),
    data BYTEA  NOT NULL,
    PRIMARY KEY (name, seq)
);

CREATE TABLE log_head (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    last_seq BIGINT  NOT NULL CHECK (last_seq >= 0)
);
INSERT INTO log_head (id, last_seq) VALUES (1, 0);

CREATE TABLE leadership (
    id         INTEGER     PRIMARY KEY CHECK (id = 1),
    epoch      BIGINT      NOT NULL,
    holder     TEXT        NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
INSERT INTO leadership (id, epoch, holder, expires_at) VALUES (1, 0, '', '1970-01-01 00:00:00+00');

CREATE TABLE leader_terms (
    epoch      BIGINT      PRIMARY KEY,
    holder     TEXT        NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    first_seq  BIGINT      NOT NULL
);

-- The fence: an append of a leader must carry the current epoch.  Raised with SQLSTATE FM001.
CREATE FUNCTION fumarole_check_epoch(want BIGINT) RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
    cur BIGINT;
    who TEXT;
BEGIN
    SELECT epoch, holder INTO cur, who FROM leadership WHERE id = 1 FOR SHARE;
    IF cur IS DISTINCT FROM want THEN
        RAISE EXCEPTION 'stale leader: an append of epoch % refused, the current epoch is % (held by %)',
            want, cur, who USING ERRCODE = 'FM001';
    END IF;
    RETURN cur;
END
$$;

-- Rows written once a leader exists must carry its epoch, whoever writes them.
CREATE FUNCTION fumarole_events_fenced() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    cur BIGINT;
    bad BIGINT;
BEGIN
    SELECT epoch INTO cur FROM leadership WHERE id = 1 FOR SHARE;
    IF cur > 0 THEN
        SELECT epoch INTO bad FROM new_rows WHERE epoch <> cur LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'stale leader: events of epoch % refused, the current epoch is %', bad, cur
                USING ERRCODE = 'FM001';
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER events_fenced AFTER INSERT ON events
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION fumarole_events_fenced();
