-- The catalog's pointer store, version 8 (PostgreSQL): a publish under another lease key is
-- refused as a wrong key before its token is compared. Tokens of different keys do not
-- compare: token 1 of `report/other` is not older than token 2 of `report/july`, yet with the
-- fence checked first (migration 0003's order) that publish answered `stale_fence`, which tells
-- the caller a newer owner published and is counted and logged as a stale publish.
--
-- Only the full decision of `_publish_v3` (as migration 0004 left it) changes. Its common
-- path, and that of `_publish_v4`, which calls this function when its own fails, already
-- require the name's key and move nothing otherwise. Same arguments, same results, same
-- refusals, now in this order: the key, stale or duplicate, the object, the version.

CREATE OR REPLACE FUNCTION {{publish_v3_fn}}(
  p_name text, p_handle text, p_token bigint, p_lease_key text, p_lease_id text,
  p_expected bigint, p_idempotency_key text, p_strict boolean)
RETURNS TABLE (version bigint, previous_handle text)
LANGUAGE plpgsql AS $fn$
DECLARE
  c_handle text; c_version bigint; c_key text; c_mark bigint;
  o_size bigint; o_checksum text;
  d_version bigint; f_mark bigint;
  t timestamptz := clock_timestamp();
BEGIN
  -- The common publish (no idempotency key, the name published before, the token may
  -- publish, under the name's key, at the expected version, of a complete live object of
  -- this name): one UPDATE locks the pointer row, checks all of that on its newest version
  -- (READ COMMITTED re-checks a row another publish moved meanwhile) and moves it. Saves the
  -- locking read and its WAL record. Anything else takes the full path below, which decides
  -- in the fence's order; this UPDATE wrote nothing then.
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
      RETURN QUERY SELECT c_version, c_handle;
      RETURN;
    END IF;
  END IF;
  -- The pointer row is the name's lock: concurrent publishes of one name queue here, and
  -- each one reads the mark its predecessor committed.
  SELECT p.handle, p.version, p.lease_key, p.high_water INTO c_handle, c_version, c_key, c_mark
    FROM {{pointer}} p WHERE p.name = p_name FOR UPDATE;
  IF NOT FOUND THEN
    -- No pointer yet: the fence table's row serialises first publishes of the name (and
    -- holds the mark of a name a catalog from before this migration fenced); then read the
    -- pointer again, since a first publish that held the row may have committed one.
    INSERT INTO {{fence}} AS f (scope, high_water) VALUES (p_name, 0)
      ON CONFLICT (scope) DO UPDATE SET updated_at = clock_timestamp()
      RETURNING f.high_water INTO f_mark;
    SELECT p.handle, p.version, p.lease_key, p.high_water INTO c_handle, c_version, c_key, c_mark
      FROM {{pointer}} p WHERE p.name = p_name FOR UPDATE;
    IF NOT FOUND THEN
      c_version := 0; c_mark := f_mark;
    END IF;
  END IF;
  -- The key before the fence: tokens of different lease keys do not compare, so a token of
  -- another key is neither stale nor a duplicate here. Checked after the pointer row is
  -- locked (or the first publish it waited for has committed one), so the key read is the
  -- committed one.
  IF c_key IS NOT NULL AND c_key <> p_lease_key THEN
    RAISE EXCEPTION USING ERRCODE = 'LHC01', MESSAGE = 'wrong_key',
      DETAIL = json_build_object('currentVersion', c_version::text, 'currentKey', c_key)::text;
  END IF;

  -- The fence: the same decision and the same idempotency table as PostgresFence.
  IF p_token < c_mark OR (p_strict AND p_token = c_mark) THEN
    IF p_idempotency_key IS NOT NULL AND EXISTS (SELECT 1 FROM {{fence_op}} o
        WHERE o.scope = p_name AND o.token = p_token AND o.op_key = p_idempotency_key) THEN
      SELECT h.version INTO d_version FROM {{history}} h
        WHERE h.name = p_name AND h.token = p_token AND h.idempotency_key = p_idempotency_key
        ORDER BY h.version DESC LIMIT 1;
      RAISE EXCEPTION USING ERRCODE = 'LH001', MESSAGE = 'duplicate', DETAIL = COALESCE(d_version::text, '');
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'LH001', MESSAGE = 'stale_fence', DETAIL = c_mark::text;
  END IF;
  IF p_idempotency_key IS NOT NULL THEN
    INSERT INTO {{fence_op}} (scope, token, op_key) VALUES (p_name, p_token, p_idempotency_key)
      ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
      SELECT h.version INTO d_version FROM {{history}} h
        WHERE h.name = p_name AND h.token = p_token AND h.idempotency_key = p_idempotency_key
        ORDER BY h.version DESC LIMIT 1;
      RAISE EXCEPTION USING ERRCODE = 'LH001', MESSAGE = 'duplicate', DETAIL = COALESCE(d_version::text, '');
    END IF;
  END IF;
  IF p_token > c_mark THEN
    -- A new generation: forget the idempotency keys of older ones (as the fence does).
    DELETE FROM {{fence_op}} o WHERE o.scope = p_name AND o.token < p_token;
  END IF;
  -- The object: a complete, live row of this name, referenced from now on. One UPDATE
  -- checks and takes it; a collector's tombstone committed first fails its re-check.
  UPDATE {{object}} o SET state = 'published', unreferenced_at = NULL
    WHERE o.handle = p_handle AND o.name = p_name AND o.state <> 'tombstoned' AND o.size IS NOT NULL
    RETURNING o.size, o.checksum INTO o_size, o_checksum;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'LHC01', MESSAGE = 'not_staged',
      DETAIL = json_build_object('currentVersion', NULL, 'currentKey', NULL)::text;
  END IF;
  IF p_expected IS NOT NULL AND p_expected <> c_version THEN
    RAISE EXCEPTION USING ERRCODE = 'LHC01', MESSAGE = 'version_conflict',
      DETAIL = json_build_object('currentVersion', c_version::text, 'currentKey', NULL)::text;
  END IF;
  IF c_handle IS NULL THEN
    INSERT INTO {{pointer}} (name, handle, token, lease_key, lease_id, version, size, checksum,
        published_at, high_water)
      VALUES (p_name, p_handle, p_token, p_lease_key, p_lease_id, 1, o_size, o_checksum, t, p_token);
  ELSE
    UPDATE {{pointer}} p SET handle = p_handle, token = p_token, lease_key = p_lease_key,
        lease_id = p_lease_id, version = c_version + 1, size = o_size, checksum = o_checksum,
        published_at = t, high_water = p_token, previous_handle = c_handle
      WHERE p.name = p_name;
  END IF;
  INSERT INTO {{history}} (name, version, handle, token, lease_key, lease_id, size, checksum, published_at, idempotency_key)
    VALUES (p_name, c_version + 1, p_handle, p_token, p_lease_key, p_lease_id, o_size, o_checksum, t, p_idempotency_key);
  IF c_handle IS NOT NULL AND c_handle <> p_handle THEN
    UPDATE {{object}} SET unreferenced_at = t WHERE handle = c_handle;
  END IF;
  RETURN QUERY SELECT c_version + 1, c_handle;
END
$fn$;
