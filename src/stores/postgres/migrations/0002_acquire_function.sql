-- leasehold PostgreSQL schema, version 2. Forward-only. Placeholders: {{lease}} (= schema.table),
-- {{acquire_fn}}.
--
-- The grant as a PL/pgSQL function, so that each session plans its statement once (a
-- simple-protocol statement is planned on every call: about half the cost of a busy answer),
-- and so that a lost race re-reads the winner inside the same call (one round trip always).
--
-- `cur` reads the row; the INSERT's
-- source is empty while a live holder exists, so a busy (or idempotent 'held') answer takes
-- no row lock, no transaction id and writes no WAL — calling a function assigns none either.
-- If the read saw the key free but another grant won meanwhile, ON CONFLICT re-checks expiry
-- on the newest row version and this call returns nothing from the first query; every query
-- of a VOLATILE function takes a fresh snapshot under READ COMMITTED, so the second query sees
-- the winner and answers busy. Only if the winner has already released again does it loop.
--
-- Returns one row (status 'acquired' | 'held' | 'busy', token as text, expires_ms,
-- remaining_ms, owner_id, owner_name, value, details_ok) or, after 5 lost races, none.
CREATE OR REPLACE FUNCTION {{acquire_fn}}(
  p_key text, p_lease uuid, p_ttl_ms bigint, p_owner text, p_value text
) RETURNS TABLE (
  status text, token text, expires_ms float8, remaining_ms int,
  owner_id text, owner_name text, value text, details_ok boolean
)
LANGUAGE plpgsql VOLATILE AS $fn$
#variable_conflict use_column
BEGIN
  FOR attempt IN 1..5 LOOP
    RETURN QUERY
    WITH cur AS (
      SELECT owner_id, lease_until, fencing_token, owner_name, value, details_owner_id,
             clock_timestamp() AS now
      FROM {{lease}} WHERE resource_key = p_key
    ), granted AS (
      INSERT INTO {{lease}} AS l
        (resource_key, owner_id, lease_until, fencing_token, owner_name, value, details_owner_id)
      SELECT p_key, p_lease, clock_timestamp() + p_ttl_ms * interval '1 millisecond', 1, p_owner, p_value, p_lease
      WHERE NOT EXISTS (SELECT 1 FROM cur WHERE cur.lease_until > cur.now)
      ON CONFLICT (resource_key) DO UPDATE SET
        owner_id = EXCLUDED.owner_id,
        lease_until = clock_timestamp() + p_ttl_ms * interval '1 millisecond',
        fencing_token = l.fencing_token + 1,
        owner_name = EXCLUDED.owner_name,
        value = EXCLUDED.value,
        details_owner_id = EXCLUDED.owner_id
      WHERE l.lease_until <= clock_timestamp()
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
  END LOOP;
END
$fn$;
