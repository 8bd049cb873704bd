-- leasehold PostgreSQL schema, version 4: notify only keys someone waits on. Forward-only.
-- Placeholders: {{lease}} (= schema.table), {{interest}}, {{notify_fn}}, {{grant_notice_fn}},
-- {{channel}}.
--
-- Before this version every release and every grant sent a NOTIFY. A transaction that
-- notified takes one database-wide lock at commit to queue its notification, so with many
-- sessions their releases committed one at a time. Now a waiter first writes a row here (one
-- per key and LISTEN session), and releases and grants notify only while such a row is live.
-- The ordering that makes this safe (decision 014): a waiter registers and takes a share lock
-- on the lease row in one transaction, after its LISTEN is live and before it re-checks the key;
-- a release or grant updates that row (which conflicts with the share lock) and only then,
-- with a fresh snapshot, looks for interest. Either the release waited for the registration
-- and sees it, or the registration waited for the release and the waiter's re-check sees the
-- released row.
--
-- UNLOGGED: a registration writes no WAL and waits for no flush. After a crash or a failover
-- the table is empty, but the LISTEN sessions are gone too; a store's listener registers its
-- keys again when it reconnects, before it wakes its waiters to re-check.
CREATE UNLOGGED TABLE IF NOT EXISTS {{interest}} (
  resource_key text COLLATE "C" NOT NULL,
  listener_id  uuid NOT NULL,
  expires_at   timestamptz NOT NULL,
  PRIMARY KEY (resource_key, listener_id)
);

-- The release trigger (migration 0001) now notifies only a key with live interest. Trigger
-- functions are VOLATILE: under READ COMMITTED the EXISTS takes a new snapshot, after this
-- statement has locked the row (AFTER triggers fire once the UPDATE is done).
CREATE OR REPLACE FUNCTION {{notify_fn}}() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
  IF EXISTS (SELECT 1 FROM {{interest}} i
             WHERE i.resource_key = NEW.resource_key AND i.expires_at > clock_timestamp()) THEN
    PERFORM pg_notify({{channel}}, NEW.resource_key);
  END IF;
  RETURN NULL;
END
$fn$;

-- The grant's notice for election observers (payload chr(1) || key), called by the acquire
-- statement after the grant function returned 'acquired': the grant has locked the row by
-- then, and this query's snapshot is taken after that.
CREATE OR REPLACE FUNCTION {{grant_notice_fn}}(p_key text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  IF EXISTS (SELECT 1 FROM {{interest}} i
             WHERE i.resource_key = p_key AND i.expires_at > clock_timestamp()) THEN
    PERFORM pg_notify({{channel}}, chr(1) || p_key);
    RETURN true;
  END IF;
  RETURN false;
END
$fn$;
