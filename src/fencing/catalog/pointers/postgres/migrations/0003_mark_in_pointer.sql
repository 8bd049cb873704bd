-- The catalog's pointer store, version 3 (PostgreSQL): the high-water mark folded into the
-- pointer row, and a publish that is one plpgsql call (decision 015). Measured before: the
-- fence's check-and-advance statement, planned afresh for every message, and its own row
-- update cost about as much as the pointer move itself; the bare fenced UPDATE a program
-- would run writes one row. Now a publish locks and updates the pointer row (HOT: no indexed
-- column changes), appends one history row, and updates the two registry rows it must.

-- The name's mark: the highest token a publish of it was applied with. Every applied
-- publish sets it to its own token, so it equals token on every row written from now on;
-- catalogs from before this migration take the fence table's mark if it is higher.
ALTER TABLE {{pointer}} ADD COLUMN IF NOT EXISTS high_water bigint;
UPDATE {{pointer}} p SET high_water = GREATEST(p.token, COALESCE(
    (SELECT f.high_water FROM {{fence}} f WHERE f.scope = p.name), 0))
  WHERE p.high_water IS NULL;
ALTER TABLE {{pointer}} ALTER COLUMN high_water SET NOT NULL;
-- Room on each page for the new version of a row, so the per-publish update stays HOT
-- (same page, no index entry) instead of moving the row and inserting into the index.
ALTER TABLE {{pointer}} SET (fillfactor = 70);

-- One publish, whole: the fence's check against the pointer row's mark, then the pointer
-- move, the history row and the registry. Raises instead of answering a refusal, so nothing
-- it wrote commits: SQLSTATE LH001 (the fence's: MESSAGE 'stale_fence' with DETAIL the mark,
-- or 'duplicate' with DETAIL the version applied) or LHC01 ('not_staged', 'version_conflict',
-- 'wrong_key'; DETAIL a JSON object with currentVersion and currentKey). Results are checked
-- in the fence's order: stale or duplicate first, then the object, the key, the version.
-- p_strict: the '>' policy (one publish per grant); else '>='.
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
  IF c_key IS NOT NULL AND c_key <> p_lease_key THEN
    RAISE EXCEPTION USING ERRCODE = 'LHC01', MESSAGE = 'wrong_key',
      DETAIL = json_build_object('currentVersion', c_version::text, 'currentKey', c_key)::text;
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
        published_at = t, high_water = p_token
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

-- The publish of versions 1 and 2 checked the fence table's mark, which publishes no longer
-- advance: a process of an older leasehold calling it after this migration would be checked
-- against a stale mark. It fails closed instead (an error, never a publish): upgrade every
-- writer of the catalog.
CREATE OR REPLACE FUNCTION {{publish_fn}}(
  p_name text, p_handle text, p_token bigint, p_lease_key text, p_lease_id text,
  p_expected bigint, p_idempotency_key text)
RETURNS TABLE (status text, version bigint, previous_handle text, current_version bigint, current_key text)
LANGUAGE plpgsql AS $fn$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'LHC02',
    MESSAGE = 'this catalog was migrated to pointer store version 3: upgrade leasehold to publish';
END
$fn$;
