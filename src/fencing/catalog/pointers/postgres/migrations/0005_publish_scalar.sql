-- The catalog's pointer store, version 5 (PostgreSQL): a publish function that returns one
-- value and bounds its own lock waits (decision 025). Same decision, same refusals, same
-- writes as version 4's function, which stays for processes that still call it.
--
-- Measured per publish on one connection with synchronous_commit = off, against version 4
-- called as before (two SET LOCAL statements, then SELECT … FROM the function): a
-- set-returning function is run into a tuplestore and read back as a table, and each SET is a
-- statement of its own for the server to parse, run and answer; a scalar call with the lock
-- timeout set inside does neither (decision 025 has the figures).
--
-- Returns the new version and the handle the pointer showed before, separated by one space
-- (handles contain none; no previous handle is the empty string). p_lock_timeout_ms bounds
-- every lock wait of the publish: the function sets lock_timeout for the rest of the
-- transaction before it takes any row lock.

CREATE OR REPLACE FUNCTION {{publish_v4_fn}}(
  p_name text, p_handle text, p_token bigint, p_lease_key text, p_lease_id text,
  p_expected bigint, p_idempotency_key text, p_strict boolean, p_lock_timeout_ms integer)
RETURNS text
LANGUAGE plpgsql AS $fn$
DECLARE
  c_handle text; c_version bigint; o_size bigint; o_checksum text;
  t timestamptz := clock_timestamp();
BEGIN
  PERFORM set_config('lock_timeout', p_lock_timeout_ms::text, true);
  -- The common publish, exactly as version 4's function runs it (see migration 0004).
  IF p_idempotency_key IS NULL THEN
    UPDATE {{pointer}} p SET handle = p_handle, token = p_token, lease_id = p_lease_id,
        version = p.version + 1, size = o.size, checksum = o.checksum, published_at = t,
        high_water = p_token, previous_handle = p.handle
      FROM {{object}} o
      WHERE p.name = p_name AND o.handle = p_handle AND o.name = p_name
        AND o.size IS NOT NULL AND o.state <> 'tombstoned'
        AND (p.high_water < p_token OR (NOT p_strict AND p.high_water = p_token))
        AND p.lease_key = p_lease_key AND (p_expected IS NULL OR p.version = p_expected)
      RETURNING p.version, p.previous_handle, o.size, o.checksum
      INTO c_version, c_handle, o_size, o_checksum;
    IF FOUND THEN
      -- The object row on its newest version: a collector's tombstone committed since the
      -- read above fails this re-check, and the whole publish rolls back.
      UPDATE {{object}} o SET state = 'published', unreferenced_at = NULL
        WHERE o.handle = p_handle AND o.state <> 'tombstoned';
      IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'LHC01', MESSAGE = 'not_staged',
          DETAIL = json_build_object('currentVersion', NULL, 'currentKey', NULL)::text;
      END IF;
      INSERT INTO {{history}} (name, version, handle, token, lease_key, lease_id, size, checksum, published_at, idempotency_key)
        VALUES (p_name, c_version, p_handle, p_token, p_lease_key, p_lease_id, o_size, o_checksum, t, NULL);
      IF c_handle <> p_handle THEN
        UPDATE {{object}} SET unreferenced_at = t WHERE handle = c_handle;
      END IF;
      RETURN c_version::text || ' ' || COALESCE(c_handle, '');
    END IF;
  END IF;
  -- Everything else: version 4's function, which tries the common path once more on a fresh
  -- snapshot (it writes nothing when that fails) and then decides in the fence's order,
  -- raising its refusals unchanged. Same transaction, so the lock timeout above holds there.
  RETURN (SELECT f.version::text || ' ' || COALESCE(f.previous_handle, '')
    FROM {{publish_v3_fn}}(p_name, p_handle, p_token, p_lease_key, p_lease_id, p_expected,
      p_idempotency_key, p_strict) f);
END
$fn$;
