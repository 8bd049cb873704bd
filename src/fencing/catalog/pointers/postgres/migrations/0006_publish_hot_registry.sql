-- The catalog's pointer store, version 6 (PostgreSQL): the registry rows a publish changes are
-- updated in place (HOT), and the publish function changes both in one statement (decision
-- 027). Same decision, same refusals, same writes, same function and arguments as version 5.
--
-- The collector's index on unreferenced_at made both registry updates of every publish
-- non-HOT: each wrote a new entry in the primary-key index, and the replaced object one more
-- in the collector's index (per publish 3 index insertions, 256 of 1,152 WAL bytes). Without
-- it the collector scans the registry (decision 027 has the figures). Room on each page for
-- the two in-place updates of a row's life: fillfactor 80 (new pages only).

DROP INDEX IF EXISTS {{object_gc_index_qualified}};
ALTER TABLE {{object}} SET (fillfactor = 80);

CREATE OR REPLACE FUNCTION {{publish_v4_fn}}(
  p_name text, p_handle text, p_token bigint, p_lease_key text, p_lease_id text,
  p_expected bigint, p_idempotency_key text, p_strict boolean, p_lock_timeout_ms integer)
RETURNS text
LANGUAGE plpgsql AS $fn$
DECLARE
  c_handle text; c_version bigint; o_size bigint; o_checksum text; c_rows integer;
  t timestamptz := clock_timestamp();
  -- An assignment, not PERFORM: PL/pgSQL evaluates a simple expression without starting the
  -- executor for a query.
  c_set text := set_config('lock_timeout', p_lock_timeout_ms::text, true);
BEGIN
  -- The common publish, as version 5 ran it (see migrations 0004 and 0005).
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
      -- Both registry rows in one statement: the object made visible, on its newest version
      -- (a collector's tombstone committed since the read above fails this re-check, and the
      -- whole publish rolls back), and the one it replaced, whose retention starts now.
      UPDATE {{object}} o
        SET state = CASE WHEN o.handle = p_handle THEN 'published' ELSE o.state END,
            unreferenced_at = CASE WHEN o.handle = p_handle THEN NULL ELSE t END
        WHERE o.handle IN (p_handle, c_handle)
          AND (o.handle <> p_handle OR o.state <> 'tombstoned');
      GET DIAGNOSTICS c_rows = ROW_COUNT;
      -- Fewer than two rows: the same handle again, the replaced row gone, or the new one
      -- tombstoned. Only the last refuses; this transaction's own update made it 'published'.
      IF c_rows < 2 AND (SELECT o.state FROM {{object}} o WHERE o.handle = p_handle)
          IS DISTINCT FROM 'published' THEN
        RAISE EXCEPTION USING ERRCODE = 'LHC01', MESSAGE = 'not_staged',
          DETAIL = json_build_object('currentVersion', NULL, 'currentKey', NULL)::text;
      END IF;
      INSERT INTO {{history}} (name, version, handle, token, lease_key, lease_id, size, checksum, published_at, idempotency_key)
        VALUES (p_name, c_version, p_handle, p_token, p_lease_key, p_lease_id, o_size, o_checksum, t, NULL);
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
