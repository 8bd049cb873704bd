-- leasehold PostgreSQL schema, version 3: token blocks (decision 007). Forward-only.
-- Placeholders: {{lease}} (= schema.table), {{acquire_fn}}, {{block_fn}}, {{block_trigger}}.
--
-- fencing_token_block: how many tokens the last grant reserved, its own included; NULL means 1
-- (every row written before this migration, and every grant without a block). The block is
-- fencing_token … fencing_token + fencing_token_block − 1: fencing_token stays the holder's
-- own token (the seed's renew and release, and leasehold's, compare it) and the next grant
-- gets fencing_token + fencing_token_block. A nullable column without a default is added
-- without rewriting the table (a short ACCESS EXCLUSIVE lock, bounded by the migration's
-- lock_timeout).
ALTER TABLE {{lease}} ADD COLUMN IF NOT EXISTS fencing_token_block integer;

-- Writers that do not know the column — the seed's literal upsert (`fencing_token + 1`) and
-- the grant function of clients not yet upgraded, if any called it — would hand out a token
-- inside a reserved block. This trigger lifts such a write above the block (and clears the
-- block): the seed's RETURNING then reports the lifted token, so the seed's programs keep
-- taking part in the same strictly increasing token sequence. Grants of this version always
-- move past the block or set a different block, the epoch advance clears it, and renewals and
-- releases do not set fencing_token: none of them fires it. The WHEN clause is evaluated
-- without calling the function.
CREATE OR REPLACE FUNCTION {{block_fn}}() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
  NEW.fencing_token := NEW.fencing_token + (OLD.fencing_token_block - 1);
  NEW.fencing_token_block := NULL;
  RETURN NEW;
END
$fn$;

DROP TRIGGER IF EXISTS {{block_trigger}} ON {{lease}};
CREATE TRIGGER {{block_trigger}}
  BEFORE UPDATE OF fencing_token ON {{lease}}
  FOR EACH ROW
  WHEN (OLD.fencing_token_block > 1
        AND NEW.fencing_token_block IS NOT DISTINCT FROM OLD.fencing_token_block
        AND NEW.fencing_token > OLD.fencing_token
        AND NEW.fencing_token < OLD.fencing_token + OLD.fencing_token_block)
  EXECUTE FUNCTION {{block_fn}}();

-- The grant with a token block: 0002's function with a sixth parameter p_block (1..64). Same
-- answers, same busy path (no row lock, no xid, no WAL); see 0002 for the race handling.
-- The next token is fencing_token + COALESCE(fencing_token_block, 1); the upsert writes
-- nothing when this grant's block would end above int64's maximum (the bound is compared as
-- max − (p_block − 1) − block, which cannot overflow), and the call then raises SQLSTATE
-- 22003 'token space … exhausted' — as the previous grant raised 22003 (bigint out of
-- range) at the maximum.
CREATE OR REPLACE FUNCTION {{acquire_fn}}(
  p_key text, p_lease uuid, p_ttl_ms bigint, p_owner text, p_value text, p_block int
) RETURNS TABLE (
  status text, token text, expires_ms float8, remaining_ms int,
  owner_id text, owner_name text, value text, details_ok boolean
)
LANGUAGE plpgsql VOLATILE AS $fn$
#variable_conflict use_column
BEGIN
  IF p_block IS NULL OR p_block < 1 OR p_block > 64 THEN
    RAISE EXCEPTION 'leasehold: p_block must be from 1 to 64, got %', p_block
      USING ERRCODE = '22023';
  END IF;
  FOR attempt IN 1..5 LOOP
    RETURN QUERY
    WITH cur AS (
      SELECT owner_id, lease_until, fencing_token, owner_name, value, details_owner_id,
             clock_timestamp() AS now
      FROM {{lease}} WHERE resource_key = p_key
    ), granted AS (
      INSERT INTO {{lease}} AS l
        (resource_key, owner_id, lease_until, fencing_token, fencing_token_block, owner_name,
         value, details_owner_id)
      SELECT p_key, p_lease, clock_timestamp() + p_ttl_ms * interval '1 millisecond', 1,
             NULLIF(p_block, 1), p_owner, p_value, p_lease
      WHERE NOT EXISTS (SELECT 1 FROM cur WHERE cur.lease_until > cur.now)
      ON CONFLICT (resource_key) DO UPDATE SET
        owner_id = EXCLUDED.owner_id,
        lease_until = clock_timestamp() + p_ttl_ms * interval '1 millisecond',
        fencing_token = l.fencing_token + COALESCE(l.fencing_token_block, 1),
        fencing_token_block = EXCLUDED.fencing_token_block,
        owner_name = EXCLUDED.owner_name,
        value = EXCLUDED.value,
        details_owner_id = EXCLUDED.owner_id
      WHERE l.lease_until <= clock_timestamp()
        AND l.fencing_token <= 9223372036854775807 - (p_block - 1) - COALESCE(l.fencing_token_block, 1)
      RETURNING fencing_token, lease_until
    )
    SELECT 'acquired' AS status, g.fencing_token::text AS token,
           extract(epoch FROM g.lease_until)::float8 * 1000 AS expires_ms,
           NULL::int AS remaining_ms, NULL::text AS owner_id, NULL::text AS owner_name,
           NULL::text AS value, true AS details_ok
    FROM granted g
    UNION ALL
    SELECT CASE WHEN c.owner_id = p_lease THEN 'held' ELSE 'busy' END,
           c.fencing_token::text,
           extract(epoch FROM c.lease_until)::float8 * 1000,
           CASE WHEN c.lease_until > c.now THEN ceil(extract(epoch FROM (c.lease_until - c.now)) * 1000)::int ELSE 0 END,
           c.owner_id::text, c.owner_name, c.value,
           c.details_owner_id IS NOT DISTINCT FROM c.owner_id
    FROM cur c
    WHERE c.lease_until > c.now;
    IF FOUND THEN RETURN; END IF;

    RETURN QUERY
    SELECT 'busy'::text, c.fencing_token::text,
           extract(epoch FROM c.lease_until)::float8 * 1000,
           GREATEST(0, ceil(extract(epoch FROM (c.lease_until - clock_timestamp())) * 1000))::int,
           c.owner_id::text, c.owner_name, c.value,
           c.details_owner_id IS NOT DISTINCT FROM c.owner_id
    FROM {{lease}} c
    WHERE c.resource_key = p_key AND c.lease_until > clock_timestamp();
    IF FOUND THEN RETURN; END IF;

    -- Neither granted nor busy: a lost race, or no room left for this block.
    IF EXISTS (
      SELECT 1 FROM {{lease}} c
      WHERE c.resource_key = p_key
        AND c.fencing_token > 9223372036854775807 - (p_block - 1) - COALESCE(c.fencing_token_block, 1)
    ) THEN
      RAISE EXCEPTION 'leasehold: token space of key % is exhausted', p_key USING ERRCODE = '22003';
    END IF;
  END LOOP;
END
$fn$;

-- The previous signature stays callable, for clients not yet upgraded during a rolling
-- upgrade: it is now the new grant with a block of 1, so an old client's grant also moves past
-- a block reserved by a new one, and answers exactly what it answered before.
CREATE OR REPLACE FUNCTION {{acquire_fn}}(
  p_key text, p_lease uuid, p_ttl_ms bigint, p_owner text, p_value text
) RETURNS TABLE (
  status text, token text, expires_ms float8, remaining_ms int,
  owner_id text, owner_name text, value text, details_ok boolean
)
LANGUAGE sql VOLATILE AS $fn$
  SELECT * FROM {{acquire_fn}}(p_key, p_lease, p_ttl_ms, p_owner, p_value, 1)
$fn$;
