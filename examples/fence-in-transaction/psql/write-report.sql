-- A report write fenced inside its own transaction, with psql alone.
--
--   psql "$DATABASE_URL" -v schema=public -v scope=report/july -v token=42 \
--        -v body='July figures' -f write-report.sql
--
-- The fence's functions are installed by its migrations (PostgresFence.migrate(), once).
-- Prints "fence: applied" and commits, or "fence: stale_fence" / "fence: duplicate" and rolls
-- back: the report row is then exactly as it was before.
\set ON_ERROR_STOP on
CREATE TABLE IF NOT EXISTS :"schema".report (
  id text PRIMARY KEY, body text NOT NULL, token bigint NOT NULL);

BEGIN;
INSERT INTO :"schema".report (id, body, token) VALUES (:'scope', :'body', :'token')
  ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, token = EXCLUDED.token;
-- The fence: the decision is taken under the scope's mark row, and commits or rolls back
-- with this transaction.
SELECT :"schema".leasehold_fence(:'scope', :'token') AS status \gset
\echo fence: :status
SELECT :'status' = 'applied' AS applied \gset
\if :applied
COMMIT;
\else
ROLLBACK;
\endif
