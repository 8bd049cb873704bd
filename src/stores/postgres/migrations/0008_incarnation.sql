-- leasehold PostgreSQL schema, version 8: the server notices a change of incarnation by itself
-- (decision 042). Forward-only. Placeholders: {{lease}}, {{incarnation}}, {{incarnation_fn}},
-- {{floor_fn}}, {{floor_trigger}}, {{incarnation_guc}}.
--
-- An incarnation is the pair (system identifier, timeline). A promoted replica keeps the
-- system identifier and starts a new timeline; a point-in-time restore of a base backup also
-- ends recovery on a new timeline; a dump restored into another cluster brings the row below
-- with the old cluster's system identifier. In each case the row, which travels with the data,
-- names an incarnation that is not the one answering, and the first write statement after the
-- change raises the token epoch before it does anything else (same transaction).
CREATE TABLE IF NOT EXISTS {{incarnation}} (
  one boolean PRIMARY KEY DEFAULT true CHECK (one),
  system_identifier text NOT NULL,
  timeline integer NOT NULL,
  -- Every token granted after the last change exceeds this (0: no change seen yet).
  floor bigint NOT NULL DEFAULT 0,
  -- When the floor was set, database clock in ms (the epoch rule's previous floor).
  floor_at_ms bigint NOT NULL DEFAULT 0,
  -- 'none' | 'failover' (same system, new timeline) | 'restore' (another system).
  reason text NOT NULL DEFAULT 'none'
);

-- The timeline is read from the name of the WAL segment being written (its first 8 hex
-- digits): it changes the moment a promotion ends recovery, while pg_control_checkpoint()
-- shows the old one until the end-of-recovery checkpoint completes.
INSERT INTO {{incarnation}} (system_identifier, timeline)
SELECT (pg_control_system()).system_identifier::text,
       ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int
WHERE NOT pg_is_in_recovery()
ON CONFLICT (one) DO NOTHING;

-- The check, sent first in every grant and renewal message of a store that detects changes. Its common
-- path is in the message itself (a session setting, see the store's INCARNATION_CHECK); this
-- function runs once per connection, or again after a change: it compares the incarnation
-- that answers with the row and, when they differ, raises every counter to a new floor and
-- clears every holder (as `leasehold epoch` does) before the statements after it in the same
-- transaction grant anything. Returns '<floor> <reason>', or '! <floor> <reason>' when this
-- call raised the floor, or 'recovery' on a standby (no write can succeed there; the next
-- message checks again). The answer is remembered in the session setting only once the
-- incarnation matches: a transaction that rolls back also rolls the setting back.
CREATE OR REPLACE FUNCTION {{incarnation_fn}}() RETURNS text
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  c_sys text;
  c_tl int;
  r record;
  c_now bigint;
  c_high bigint;
  c_floor bigint;
  c_reason text;
  c_set text;
BEGIN
  IF pg_is_in_recovery() THEN
    RETURN 'recovery';
  END IF;
  c_sys := (pg_control_system()).system_identifier::text;
  c_tl := ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int;
  SELECT * INTO r FROM {{incarnation}};
  IF FOUND AND r.system_identifier = c_sys AND r.timeline = c_tl THEN
    c_set := set_config({{incarnation_guc}}, r.floor || ' ' || r.reason, false);
    RETURN c_set;
  END IF;
  -- Conflicts with every grant, renewal and release (ROW EXCLUSIVE) and with itself: one
  -- session raises, the others wait and then find the row matching.
  c_set := set_config('lock_timeout', '10000', true);
  LOCK TABLE {{lease}} IN SHARE ROW EXCLUSIVE MODE;
  SELECT * INTO r FROM {{incarnation}} FOR UPDATE;
  IF NOT FOUND THEN
    -- Migrated on a standby and never written since: nothing to compare with.
    INSERT INTO {{incarnation}} (system_identifier, timeline) VALUES (c_sys, c_tl);
    c_set := set_config({{incarnation_guc}}, '0 none', false);
    RETURN c_set;
  END IF;
  IF r.system_identifier = c_sys AND r.timeline = c_tl THEN
    c_set := set_config({{incarnation_guc}}, r.floor || ' ' || r.reason, false);
    RETURN c_set;
  END IF;
  c_reason := CASE WHEN r.system_identifier = c_sys THEN 'failover' ELSE 'restore' END;
  -- The epoch rule (decision 011): above the clock × 1024, above every token this copy knows
  -- (with the blocks reserved), and above what the previous floor could have grown to since.
  c_now := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
  SELECT COALESCE(max(fencing_token + (COALESCE(fencing_token_block, 1) - 1)), 0)
    INTO c_high FROM {{lease}};
  c_floor := greatest(c_now * 1024, c_high + 1);
  IF r.floor > 0 THEN
    c_floor := greatest(c_floor, r.floor + 1 + greatest(c_now - r.floor_at_ms, 0) * 1024);
  END IF;
  UPDATE {{lease}}
    SET fencing_token = c_floor, fencing_token_block = NULL, owner_id = NULL,
        lease_until = '-infinity'::timestamptz, owner_name = NULL, value = NULL,
        details_owner_id = NULL
    WHERE fencing_token < c_floor OR owner_id IS NOT NULL OR fencing_token_block IS NOT NULL;
  -- Keys created later start above the floor: the same trigger `leasehold epoch` installs.
  EXECUTE format(
    'CREATE OR REPLACE FUNCTION {{floor_fn}}() RETURNS trigger LANGUAGE plpgsql AS $t$ '
    'BEGIN IF NEW.fencing_token <= %s THEN NEW.fencing_token := %s; END IF; RETURN NEW; END $t$',
    c_floor, c_floor + 1);
  EXECUTE 'DROP TRIGGER IF EXISTS {{floor_trigger}} ON {{lease}}';
  EXECUTE format(
    'CREATE TRIGGER {{floor_trigger}} BEFORE INSERT ON {{lease}} FOR EACH ROW '
    'WHEN (NEW.fencing_token <= %s) EXECUTE FUNCTION {{floor_fn}}()', c_floor);
  UPDATE {{incarnation}}
    SET system_identifier = c_sys, timeline = c_tl, floor = c_floor, floor_at_ms = c_now,
        reason = c_reason;
  c_set := set_config({{incarnation_guc}}, c_floor || ' ' || c_reason, false);
  RETURN '! ' || c_set;
END
$fn$;
