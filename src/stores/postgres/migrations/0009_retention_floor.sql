-- leasehold PostgreSQL schema, version 9: the retention floor (decision 049). Forward-only.
-- Placeholders: {{lease}}, {{retention}}, {{retention_fn}}, {{retention_trigger}},
-- {{retention_lock}}.
--
-- Retention deletes the rows of released and long-expired keys. A key inserted again later
-- must not start at 1: `floor` is at least the top of every deleted row's last token block,
-- raised in the transaction that deletes, and a new row's first token is raised above it.
-- Existing rows are never touched by it: a grant of an existing key counts from the row's
-- own token, and renewals and releases do not insert.
--
-- Why a lock: an INSERT whose trigger read the floor just before a prune committed could
-- insert a key that prune deleted with the floor from before (its unique-index wait happens
-- after the trigger). The trigger takes a shared transaction-level advisory lock before it
-- reads; the prune takes it exclusively for each batch. So a prune waits for inserts in
-- progress, and an insert that comes during a prune waits and then reads the raised floor.
-- Advisory rather than a row lock on {{retention}}: a shared row lock writes the tuple on
-- every new key; an advisory lock lives only in the lock table.
CREATE TABLE IF NOT EXISTS {{retention}} (
  id    integer PRIMARY KEY CHECK (id = 1),
  floor bigint NOT NULL DEFAULT 0 CHECK (floor >= 0)
);
INSERT INTO {{retention}} (id) VALUES (1) ON CONFLICT (id) DO NOTHING;

CREATE OR REPLACE FUNCTION {{retention_fn}}() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
  f bigint;
BEGIN
  PERFORM pg_advisory_xact_lock_shared(hashtext({{retention_lock}}));
  SELECT r.floor INTO f FROM {{retention}} AS r WHERE r.id = 1;
  -- A row a waiter's interest creates before any grant carries token 0: it is raised to the
  -- floor itself, so its first grant (token + 1) lands above the floor; a floor of 0 (nothing
  -- pruned yet) leaves it at 0, as before retention. A granted row starts above the floor.
  IF f IS NOT NULL AND f > 0 AND NEW.fencing_token <= f THEN
    NEW.fencing_token := CASE WHEN NEW.fencing_token = 0 THEN f ELSE f + 1 END;
  END IF;
  RETURN NEW;
END
$fn$;

DROP TRIGGER IF EXISTS {{retention_trigger}} ON {{lease}};
CREATE TRIGGER {{retention_trigger}}
  BEFORE INSERT ON {{lease}}
  FOR EACH ROW
  EXECUTE FUNCTION {{retention_fn}}();
