"""The PostgreSQL store's schema and statements: the tables, the one-round-trip append function
the schema setup installs, and the queries the store sends."""

from __future__ import annotations

CLOCK = """to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')"""

TABLES = """
CREATE TABLE IF NOT EXISTS loopx_head (
    log text PRIMARY KEY,
    seq bigint NOT NULL,
    hash text NOT NULL,
    ts text
);
CREATE TABLE IF NOT EXISTS loopx_record (
    log text NOT NULL,
    seq bigint NOT NULL,
    batch_end bigint NOT NULL,
    record_id text NOT NULL,
    prev_hash text NOT NULL,
    hash text NOT NULL,
    ts text NOT NULL,
    line bytea NOT NULL,
    PRIMARY KEY (log, seq),
    UNIQUE (log, record_id)
);
CREATE TABLE IF NOT EXISTS loopx_sync (
    pid integer PRIMARY KEY,
    n bigint NOT NULL
);
"""

# The optimistic append, in one statement: the client sealed the batch against the head it
# knew (p_seq, p_hash); the rows go in and the head moves only if that is still the head once
# its row is locked, so the write checks the client ran saw the head the batch commits on.
# Otherwise nothing is written and the answer carries the head (and, when few, the lines the
# client has not seen) so that it can rebuild the batch without another query. The clock the
# client read (p_now: its estimate of this server's clock) must be within p_slack seconds of
# the server's, or nothing is written either ('clock'). Called on its own in autocommit, its
# commit waits for the WAL flush under the session's synchronous_commit (on or stronger), as a
# plain INSERT's does, before the answer is sent.
APPEND_FUNCTION = f"""
CREATE OR REPLACE FUNCTION loopx_append(
    p_log text, p_seq bigint, p_hash text, p_now text, p_slack double precision,
    p_channel text, p_head_hash text, p_ts text, p_catch_up integer,
    p_seqs bigint[], p_ends bigint[], p_ids text[], p_prevs text[], p_hashes text[],
    p_lines bytea[])
RETURNS TABLE (o_status text, o_seq bigint, o_hash text, o_ts text, o_now text,
               o_lines bytea[])
LANGUAGE plpgsql AS $fn$
DECLARE
    h record;
    n integer := cardinality(p_seqs);
BEGIN
    SELECT l.seq, l.hash, l.ts INTO h FROM loopx_head l WHERE l.log = p_log FOR UPDATE;
    IF NOT FOUND THEN
        o_status := 'missing';
        RETURN NEXT;
        RETURN;
    END IF;
    o_now := {CLOCK};
    o_seq := h.seq;
    o_hash := h.hash;
    o_ts := h.ts;
    IF h.seq <> p_seq OR h.hash <> p_hash OR p_ts < h.ts THEN  -- (a ts never goes back)
        o_status := 'moved';
        IF h.seq > p_seq AND h.seq - p_seq <= p_catch_up THEN
            SELECT array_agg(r.line ORDER BY r.seq) INTO o_lines FROM loopx_record r
            WHERE r.log = p_log AND r.seq > p_seq AND r.seq <= h.seq;
        END IF;
        RETURN NEXT;
        RETURN;
    END IF;
    IF p_now IS NOT NULL
       AND abs(extract(epoch FROM p_now::timestamptz - clock_timestamp())) > p_slack THEN
        o_status := 'clock';
        RETURN NEXT;
        RETURN;
    END IF;
    INSERT INTO loopx_record (log, seq, batch_end, record_id, prev_hash, hash, ts, line)
    SELECT p_log, t.seq, t.batch_end, t.record_id, t.prev_hash, t.hash, p_ts, t.line
    FROM unnest(p_seqs, p_ends, p_ids, p_prevs, p_hashes, p_lines)
         AS t(seq, batch_end, record_id, prev_hash, hash, line);
    UPDATE loopx_head SET seq = p_seqs[n], hash = p_head_hash, ts = p_ts WHERE log = p_log;
    PERFORM pg_notify(p_channel, p_seqs[n]::text);
    o_status := 'ok';
    o_seq := p_seqs[n];
    o_hash := p_head_hash;
    o_ts := p_ts;
    RETURN NEXT;
END
$fn$;
"""
SCHEMA = TABLES + APPEND_FUNCTION

APPEND = """
SELECT * FROM loopx_append(%s::text, %s::bigint, %s::text, %s::text, %s::float8, %s::text,
                           %s::text, %s::text, %s::integer, %s::bigint[], %s::bigint[],
                           %s::text[], %s::text[], %s::text[], %s::bytea[])
"""
# The outer select list is evaluated after the row lock is granted, so the clock is read once
# this writer holds the log, not before it queued.
LOCK_HEAD = f"""
SELECT h.seq, h.hash, h.ts, {CLOCK}
FROM (SELECT seq, hash, ts FROM loopx_head WHERE log = %s FOR UPDATE) h
"""
CATCH_UP_LINES = """
SELECT line FROM loopx_record WHERE log = %s AND seq > %s ORDER BY seq LIMIT %s
"""
WRITE = """
WITH ins AS (
    INSERT INTO loopx_record (log, seq, batch_end, record_id, prev_hash, hash, ts, line)
    SELECT %(log)s, t.seq, t.batch_end, t.record_id, t.prev_hash, t.hash, t.ts, t.line
    FROM unnest(%(seqs)s::bigint[], %(ends)s::bigint[], %(ids)s::text[], %(prevs)s::text[],
                %(hashes)s::text[], %(tss)s::text[], %(lines)s::bytea[])
         AS t(seq, batch_end, record_id, prev_hash, hash, ts, line)
)
UPDATE loopx_head SET seq = %(head_seq)s, hash = %(head_hash)s, ts = %(ts)s
WHERE log = %(log)s
RETURNING pg_notify(%(channel)s, %(head_seq)s::text)
"""
# One row per server process: a tiny write that makes its transaction's COMMIT wait for the
# WAL flush, without contending with other writers.
SYNC = """
INSERT INTO loopx_sync (pid, n) VALUES (pg_backend_pid(), 1)
ON CONFLICT (pid) DO UPDATE SET n = loopx_sync.n + 1
"""
SERVER_NOW = f"SELECT {CLOCK}"
