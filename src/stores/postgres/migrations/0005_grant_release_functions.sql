-- leasehold PostgreSQL schema, version 5: a grant and a release that each set their own
-- lock_timeout and synchronous_commit. Forward-only. Placeholders: {{lease}} (= schema.table),
-- {{acquire_fn}}, {{grant_notice_fn}}, {{grant_fn}}, {{release_fn}}.
--
-- Before this version a lone grant or release went out as four statements in one message:
-- SET LOCAL statement_timeout, SET LOCAL lock_timeout, SET LOCAL synchronous_commit, then the
-- statement. Each SET is a statement of its own (parsed, executed, answered with a
-- CommandComplete the client turns into a result object), and the grant's answer had nine
-- columns, each described, looked up and parsed by the client. These two functions take the
-- lock timeout and the commit mode as arguments and set them for the transaction
-- (set_config(…, true), which lasts to the end of the transaction like SET LOCAL) before
-- their first query, so the message is SET LOCAL statement_timeout and one call. The
-- statement timeout stays a SET before the call: it must be in force when the statement
-- starts, and a value set during a statement does not bound that statement. The old grant
-- function, the old statements and the seed's statements keep working unchanged on the same
-- table (clients not yet upgraded, the batches of decision 017, other programs).
--
-- Measured on the shared 2-core VM (2026-12-03, load 5), one connection, a grant and a
-- release per cycle, commits not waiting for the disk, 9 interleaved rounds of 2,000 cycles:
-- the old messages 198 µs client / 460 µs backend CPU per cycle, these 175 / 395 (medians of
-- the per-round ratios 0.88 / 0.91). Through LeaseClient at 1 worker (bench/postgres-ab.ts,
-- 30–40 rounds of 0.4 s, four runs) the CPU ratios were 0.90–0.98 client and 0.92–0.99
-- backend; throughput moved within the machine's noise (0.91–1.08×).
--
-- Why the settings hold: lock_timeout is read when a lock wait begins, and every lock these
-- functions take is taken by a query after the PERFORM that set it; synchronous_commit is
-- read when the transaction commits, after the call. A function without a SET clause and
-- without an exception block does not restore settings on exit. p_sync NULL leaves the
-- commit mode alone (synchronousCommit: 'server_default').

-- The grant: the grant function of 0003 (unchanged: the same answers, a busy answer still
-- takes no row lock, no xid, no WAL), then, after a new grant, the grant notice of 0004 (a
-- query of its own after the grant locked the row, so its snapshot sees interest registered
-- before that, as the acquire statement's separate call did). No row after repeated lost
-- races. The answer is packed into one text column plus the two free-text columns:
-- answer = status, token, expires_ms, remaining_ms, owner_id, details_ok ('t'/'f'),
-- separated by single spaces, an absent value empty; none of them can contain a space.
CREATE OR REPLACE FUNCTION {{grant_fn}}(
  p_key text, p_lease uuid, p_ttl_ms bigint, p_owner text, p_value text, p_block int,
  p_lock_timeout_ms int, p_sync text
) RETURNS TABLE (answer text, holder_name text, holder_value text)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  r record;
BEGIN
  PERFORM set_config('lock_timeout', p_lock_timeout_ms::text, true);
  IF p_sync IS NOT NULL THEN
    PERFORM set_config('synchronous_commit', p_sync, true);
  END IF;
  SELECT * INTO r FROM {{acquire_fn}}(p_key, p_lease, p_ttl_ms, p_owner, p_value, p_block);
  IF NOT FOUND THEN
    RETURN;
  END IF;
  IF r.status = 'acquired' THEN
    PERFORM {{grant_notice_fn}}(p_key);
  END IF;
  answer := r.status || ' ' || r.token || ' ' || coalesce(r.expires_ms::text, '') || ' ' ||
    coalesce(r.remaining_ms::text, '') || ' ' || coalesce(r.owner_id, '') || ' ' ||
    CASE WHEN r.details_ok THEN 't' ELSE 'f' END;
  holder_name := r.owner_name;
  holder_value := r.value;
  RETURN NEXT;
END
$fn$;

-- The seed's conditional release (the same UPDATE as the store's release statement: the
-- table's notify trigger fires as before, at the end of the UPDATE, with its own snapshot).
-- Answers whether it released.
CREATE OR REPLACE FUNCTION {{release_fn}}(
  p_key text, p_lease uuid, p_token bigint, p_lock_timeout_ms int, p_sync text
) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  PERFORM set_config('lock_timeout', p_lock_timeout_ms::text, true);
  IF p_sync IS NOT NULL THEN
    PERFORM set_config('synchronous_commit', p_sync, true);
  END IF;
  UPDATE {{lease}}
  SET owner_id = NULL,
      lease_until = '-infinity'::timestamptz,
      owner_name = NULL,
      value = NULL,
      details_owner_id = NULL
  WHERE resource_key = p_key
    AND owner_id = p_lease
    AND fencing_token = p_token;
  RETURN FOUND;
END
$fn$;
