-- The catalog's pointer store, version 1 (PostgreSQL). {{pointer}}, {{history}}, {{object}}
-- are the escaped schema.table names; the high-water mark per name lives in the
-- PostgresFence tables next to them. Times are the database's clock_timestamp().

-- The visible object per name.
CREATE TABLE IF NOT EXISTS {{pointer}} (
  name         text COLLATE "C" PRIMARY KEY,
  handle       text COLLATE "C" NOT NULL,
  token        bigint NOT NULL,
  lease_key    text COLLATE "C" NOT NULL,
  lease_id     text NOT NULL,
  version      bigint NOT NULL CHECK (version > 0),
  size         bigint NOT NULL,
  checksum     text NOT NULL,
  published_at timestamptz NOT NULL
);

-- Every applied publish, one row per (name, version).
CREATE TABLE IF NOT EXISTS {{history}} (
  name            text COLLATE "C" NOT NULL,
  version         bigint NOT NULL,
  handle          text COLLATE "C" NOT NULL,
  token           bigint NOT NULL,
  lease_key       text COLLATE "C" NOT NULL,
  lease_id        text NOT NULL,
  size            bigint NOT NULL,
  checksum        text NOT NULL,
  published_at    timestamptz NOT NULL,
  idempotency_key text COLLATE "C",
  PRIMARY KEY (name, version)
);

-- Every object the catalog staged and has not yet collected. unreferenced_at is NULL while
-- the pointer shows the object, else since when nothing has (the staged time for an object
-- never published): the collector's retention counts from it.
CREATE TABLE IF NOT EXISTS {{object}} (
  handle          text COLLATE "C" PRIMARY KEY,
  name            text COLLATE "C" NOT NULL,
  state           text NOT NULL CHECK (state IN ('staged', 'published', 'tombstoned')),
  token           bigint NOT NULL,
  lease_id        text NOT NULL,
  size            bigint,
  checksum        text,
  staged_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
  unreferenced_at timestamptz DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS {{object_gc_index}} ON {{object}} (unreferenced_at) WHERE unreferenced_at IS NOT NULL;

-- The pointer move, run inside the fenced transaction right after the high-water mark
-- advanced (the caller rolls back unless status is 'applied'). Locks the object's row, so a
-- collector cannot tombstone it meanwhile, and refuses one that is missing, incomplete, of
-- another name or tombstoned. Returns one row: status ('applied', 'not_staged',
-- 'version_conflict', 'wrong_key'), version, previous_handle, current_version, current_key.
CREATE OR REPLACE FUNCTION {{publish_fn}}(
  p_name text, p_handle text, p_token bigint, p_lease_key text, p_lease_id text,
  p_expected bigint, p_idempotency_key text)
RETURNS TABLE (status text, version bigint, previous_handle text, current_version bigint, current_key text)
LANGUAGE plpgsql AS $fn$
DECLARE
  o_name text; o_state text; o_size bigint; o_checksum text;
  c_handle text; c_version bigint := 0; c_key text;
  t timestamptz := clock_timestamp();
BEGIN
  SELECT o.name, o.state, o.size, o.checksum INTO o_name, o_state, o_size, o_checksum
    FROM {{object}} o WHERE o.handle = p_handle FOR UPDATE;
  IF NOT FOUND OR o_name <> p_name OR o_state = 'tombstoned' OR o_size IS NULL THEN
    RETURN QUERY SELECT 'not_staged'::text, NULL::bigint, NULL::text, NULL::bigint, NULL::text;
    RETURN;
  END IF;
  SELECT p.handle, p.version, p.lease_key INTO c_handle, c_version, c_key
    FROM {{pointer}} p WHERE p.name = p_name FOR UPDATE;
  IF NOT FOUND THEN
    c_version := 0;
  ELSIF c_key <> p_lease_key THEN
    RETURN QUERY SELECT 'wrong_key'::text, NULL::bigint, NULL::text, c_version, c_key;
    RETURN;
  END IF;
  IF p_expected IS NOT NULL AND p_expected <> c_version THEN
    RETURN QUERY SELECT 'version_conflict'::text, NULL::bigint, NULL::text, c_version, NULL::text;
    RETURN;
  END IF;
  INSERT INTO {{pointer}} AS p (name, handle, token, lease_key, lease_id, version, size, checksum, published_at)
    VALUES (p_name, p_handle, p_token, p_lease_key, p_lease_id, c_version + 1, o_size, o_checksum, t)
    ON CONFLICT (name) DO UPDATE SET handle = EXCLUDED.handle, token = EXCLUDED.token,
      lease_key = EXCLUDED.lease_key, lease_id = EXCLUDED.lease_id, version = EXCLUDED.version,
      size = EXCLUDED.size, checksum = EXCLUDED.checksum, published_at = EXCLUDED.published_at;
  INSERT INTO {{history}} (name, version, handle, token, lease_key, lease_id, size, checksum, published_at, idempotency_key)
    VALUES (p_name, c_version + 1, p_handle, p_token, p_lease_key, p_lease_id, o_size, o_checksum, t, p_idempotency_key);
  UPDATE {{object}} SET state = 'published', unreferenced_at = NULL WHERE handle = p_handle;
  IF c_handle IS NOT NULL AND c_handle <> p_handle THEN
    UPDATE {{object}} SET unreferenced_at = t WHERE handle = c_handle;
  END IF;
  RETURN QUERY SELECT 'applied'::text, c_version + 1, c_handle, c_version + 1, NULL::text;
END
$fn$;
