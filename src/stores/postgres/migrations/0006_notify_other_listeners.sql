-- leasehold PostgreSQL schema, version 6: a store's own grants and releases do not notify its
-- own listener (decision 029). Forward-only. Placeholders: {{lease}} (= schema.table),
-- {{interest}}, {{notify_fn}}, {{grant_notice_fn}}, {{grant_fn}}, {{release_fn}},
-- {{acquire_fn}}, {{channel}}.
--
-- A store that opened its own pool wakes its own waiters from its statements' answers and
-- drops the notifications its own backends send (decision 022). Those notifications were
-- still sent: the committing backend queued them under the database-wide notify lock, the
-- LISTEN session's backend was signalled and woke to forward them, and the client parsed them
-- only to drop them — on a two-core machine, right when the next waiter's grant runs. Now the
-- grant and release functions take the caller's listener id and set it for the transaction
-- (`leasehold.listener_id`, transaction-local), and the notify functions skip interest rows of
-- that listener: a key only this store waits on notifies nobody, a key waited on elsewhere
-- notifies as before. A caller that passes NULL (a store on the caller's pool, whose
-- connections other code shares) and every older function, statement and program (which
-- never set it) notify every interested listener, exactly as version 4 did.

-- The release trigger: interest of any listener but the committing transaction's own.
-- current_setting(…, true) is NULL when the setting was never defined in the session and ''
-- once a transaction that set it has ended; neither equals a listener id.
CREATE OR REPLACE FUNCTION {{notify_fn}}() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
  IF EXISTS (SELECT 1 FROM {{interest}} i
             WHERE i.resource_key = NEW.resource_key AND i.expires_at > clock_timestamp()
               AND i.listener_id::text IS DISTINCT FROM current_setting('leasehold.listener_id', true)) THEN
    PERFORM pg_notify({{channel}}, NEW.resource_key);
  END IF;
  RETURN NULL;
END
$fn$;

-- The grant's notice for election observers, with the same exclusion.
CREATE OR REPLACE FUNCTION {{grant_notice_fn}}(p_key text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  IF EXISTS (SELECT 1 FROM {{interest}} i
             WHERE i.resource_key = p_key AND i.expires_at > clock_timestamp()
               AND i.listener_id::text IS DISTINCT FROM current_setting('leasehold.listener_id', true)) THEN
    PERFORM pg_notify({{channel}}, chr(1) || p_key);
    RETURN true;
  END IF;
  RETURN false;
END
$fn$;

-- The grant of version 5 with one more argument, p_listener: the caller's listener id, or
-- NULL. The eight-argument function stays for clients of version 5.
CREATE OR REPLACE FUNCTION {{grant_fn}}(
  p_key text, p_lease uuid, p_ttl_ms bigint, p_owner text, p_value text, p_block int,
  p_lock_timeout_ms int, p_sync text, p_listener text
) RETURNS TABLE (answer text, holder_name text, holder_value text)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  r record;
BEGIN
  PERFORM set_config('lock_timeout', p_lock_timeout_ms::text, true);
  IF p_sync IS NOT NULL THEN
    PERFORM set_config('synchronous_commit', p_sync, true);
  END IF;
  IF p_listener IS NOT NULL THEN
    PERFORM set_config('leasehold.listener_id', p_listener, true);
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

-- The release of version 5 with p_listener, as the grant. The setting is in force when the
-- UPDATE's trigger runs (after the PERFORM, in the same transaction).
CREATE OR REPLACE FUNCTION {{release_fn}}(
  p_key text, p_lease uuid, p_token bigint, p_lock_timeout_ms int, p_sync text, p_listener text
) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  PERFORM set_config('lock_timeout', p_lock_timeout_ms::text, true);
  IF p_sync IS NOT NULL THEN
    PERFORM set_config('synchronous_commit', p_sync, true);
  END IF;
  IF p_listener IS NOT NULL THEN
    PERFORM set_config('leasehold.listener_id', p_listener, true);
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
