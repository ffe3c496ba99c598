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
# The append of a plain batch (no write checks to run against the head), sealed by the server
# under the head row's lock in one CALL, so that concurrent writers never rebuild against a
# head that moved. The client sends each record's id and its canonical line in the six pieces
# between its store fields (postgres_rows.pieces), all in one bytea with a text of the offsets
# where the pieces start (two scalars cost far less to send than arrays). The procedure fills
# the store fields exactly as base.seal does, hashes each line without its hash, and answers
# with the head it sealed on, the ts and the new head's hash, which the client checks by sealing
# the batch itself (the last hash covers every line before it). With p_flush, its COMMIT does
# not wait for the WAL flush, so the head row is held only for the work above; then, in a
# second transaction, a logical message is written whose commit waits (under the session's
# synchronous_commit) for the flush of all WAL before it, this batch included, before the
# answer goes out. Without p_flush (tests, in an explicit transaction) the caller commits. A
# batch over the size limits raises SIZE_STATE and nothing is written: the client seals it
# itself for the exact refusal. The version is in the routine's name: a procedure's INOUT
# parameters are part of its identity, so a changed signature under the same name would be an
# overload the server cannot choose between.
SIZE_STATE = "54LX1"
SEAL_PROCEDURE = f"""
CREATE OR REPLACE PROCEDURE loopx_append_sealed_v2(
    p_log text, p_now text, p_channel text, p_data bytea, p_starts text,
    p_max_line integer, p_max_batch integer, p_flush boolean,
    INOUT o_seq bigint DEFAULT NULL, INOUT o_hash text DEFAULT NULL,
    INOUT o_ts text DEFAULT NULL, INOUT o_head text DEFAULT NULL)
LANGUAGE plpgsql AS $fn$
DECLARE
    s integer[] := string_to_array(p_starts, ',')::integer[];
    n integer := (cardinality(s) - 1) / 7;
    v_head_ts text;
    v_prev text;
    v_hash text;
    v_end bytea;
    v_ts_item bytea;
    v_front bytea;
    v_back bytea;
    v_line bytea;
    v_size bigint := 0;
BEGIN
    SELECT l.seq, l.hash, l.ts INTO o_seq, o_hash, v_head_ts
    FROM loopx_head l WHERE l.log = p_log FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;  -- o_seq NULL: no such log
    END IF;
    o_ts := greatest(coalesce(p_now, {CLOCK}), v_head_ts);  -- a ts never goes back
    v_ts_item := convert_to('"ts":"' || o_ts || '"', 'UTF8');
    v_end := convert_to('"batch_end":' || (o_seq + n), 'UTF8');
    v_prev := o_hash;
    FOR i IN 1..n LOOP
        -- record i: its id from s[7i-6], the six pieces of its line from s[7i-5] to s[7i+1]
        v_front := substring(p_data FROM s[7*i-5] FOR s[7*i-4] - s[7*i-5]) || v_end
                   || substring(p_data FROM s[7*i-4] FOR s[7*i-3] - s[7*i-4]);
        v_back := substring(p_data FROM s[7*i-3] FOR s[7*i-2] - s[7*i-3])
                  || convert_to('"prev_hash":"' || v_prev || '"', 'UTF8')
                  || substring(p_data FROM s[7*i-2] FOR s[7*i-1] - s[7*i-2])
                  || convert_to('"seq":' || (o_seq + i), 'UTF8')
                  || substring(p_data FROM s[7*i-1] FOR s[7*i] - s[7*i-1]) || v_ts_item
                  || substring(p_data FROM s[7*i] FOR s[7*i+1] - s[7*i]);
        v_hash := encode(sha256(v_front || v_back), 'hex');
        v_line := v_front || convert_to(',"hash":"' || v_hash || '"', 'UTF8') || v_back;
        v_size := v_size + length(v_line) + 1;
        IF length(v_line) > p_max_line OR v_size > p_max_batch THEN
            RAISE EXCEPTION 'batch over the size limits' USING ERRCODE = '{SIZE_STATE}';
        END IF;
        INSERT INTO loopx_record (log, seq, batch_end, record_id, prev_hash, hash, ts, line)
        VALUES (p_log, o_seq + i, o_seq + n,
                convert_from(substring(p_data FROM s[7*i-6] FOR s[7*i-5] - s[7*i-6]), 'UTF8'),
                v_prev, v_hash, o_ts, v_line);
        v_prev := v_hash;
    END LOOP;
    UPDATE loopx_head SET seq = o_seq + n, hash = v_prev, ts = o_ts WHERE log = p_log;
    o_head := v_prev;
    PERFORM pg_notify(p_channel, (o_seq + n)::text);
    IF p_flush THEN
        SET LOCAL synchronous_commit = off;
        COMMIT;
        PERFORM pg_logical_emit_message(true, 'loopx', '');
    END IF;
END
$fn$;
"""
# A log moved to another store (``loopx store copy --use``) keeps where it went in its head
# row; from then on the trigger refuses every update that would move the head, so every append
# path (the function, the procedure, the locked write, a copy's load), from any client version
# on any host, fails with MOVED_STATE and writes nothing. The WHEN clause is evaluated without
# calling the function, so an append to a log that never moved pays almost nothing for it.
MOVED_STATE = "54LX2"
MOVED_SCHEMA = f"""
CREATE OR REPLACE FUNCTION loopx_refuse_moved() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '{MOVED_STATE}', MESSAGE = OLD.moved_to,
        DETAIL = OLD.seq::text || ' ' || OLD.hash;
END
$fn$;
DO $do$
BEGIN
    -- (checked first: ALTER TABLE would lock the table even when the column is there)
    IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'loopx_head'::regclass
                   AND attname = 'moved_to' AND NOT attisdropped) THEN
        ALTER TABLE loopx_head ADD COLUMN moved_to text;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'loopx_head_moved'
                   AND tgrelid = 'loopx_head'::regclass) THEN
        CREATE TRIGGER loopx_head_moved BEFORE UPDATE ON loopx_head FOR EACH ROW
        WHEN (OLD.moved_to IS NOT NULL AND NEW.seq IS DISTINCT FROM OLD.seq)
        EXECUTE FUNCTION loopx_refuse_moved();
    END IF;
END
$do$;
"""
SCHEMA = TABLES + APPEND_FUNCTION + SEAL_PROCEDURE + MOVED_SCHEMA
# Waiters on the log's channel wake (at commit) to find it moved: its head will never pass.
MARK_MOVED = ("UPDATE loopx_head SET moved_to = %s WHERE log = %s "
              "RETURNING pg_notify(%s, seq::text)")
READ_MOVED = "SELECT moved_to, seq, hash FROM loopx_head WHERE log = %s"

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
APPEND_SEALED = ("CALL loopx_append_sealed_v2(%b::text, %b::text, %b::text, %b::bytea, %b::text,"
                 " %b::integer, %b::integer, %b::boolean)")
# A write whose commit waits for the WAL flush (past every commit before it) under the
# session's synchronous_commit: a transactional logical message touches no table.
SYNC = "SELECT pg_logical_emit_message(true, 'loopx', '')"
SERVER_NOW = f"SELECT {CLOCK}"
