-- leasehold PostgreSQL schema, version 1. Forward-only.
-- Placeholders, replaced once with escaped identifiers / literals when the migration runs:
--   {{schema}} {{table}} {{lease}} (= schema.table) {{notify_fn}} {{notify_trigger}} {{channel}}
--
-- The first four columns are exactly the seed's coordination_lease (§4), so the seed's own
-- acquire / renew / release statements interoperate with leasehold clients on this table:
-- owner_id holds the lease id (a UUID). Rows are kept after release, so tokens never reset.
-- resource_key uses the "C" collation: keys order by code point (= UTF-8 bytes), the order
-- every leasehold store lists in, and prefix scans use the primary-key index.
-- owner_name / value describe the holder whose lease id is details_owner_id; a writer that
-- does not know these columns (the seed's upsert) leaves them stale, and readers then ignore
-- them because details_owner_id no longer matches owner_id.
CREATE TABLE IF NOT EXISTS {{lease}} (
  resource_key     text COLLATE "C" PRIMARY KEY,
  owner_id         uuid,
  lease_until      timestamptz NOT NULL DEFAULT '-infinity'::timestamptz,
  fencing_token    bigint NOT NULL DEFAULT 0 CHECK (fencing_token >= 0),
  owner_name       text,
  value            text,
  details_owner_id uuid
);

-- Waiters sleep on LISTEN; a release (by any program: owner_id becomes NULL) wakes them.
-- The payload is the key. NOTIFY is delivered at commit, so the release is visible by then.
CREATE OR REPLACE FUNCTION {{notify_fn}}() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
  PERFORM pg_notify({{channel}}, NEW.resource_key);
  RETURN NULL;
END
$fn$;

DROP TRIGGER IF EXISTS {{notify_trigger}} ON {{lease}};
CREATE TRIGGER {{notify_trigger}}
  AFTER UPDATE ON {{lease}}
  FOR EACH ROW
  WHEN (OLD.owner_id IS NOT NULL AND NEW.owner_id IS NULL)
  EXECUTE FUNCTION {{notify_fn}}();
