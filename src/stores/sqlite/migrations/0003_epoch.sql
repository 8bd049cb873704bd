-- leasehold SQLite schema, version 3: the fencing epoch. Forward-only.
-- Placeholders: {{table}}, {{epoch}} (the epoch table), {{floor_guard}}, {{count_insert}},
-- {{count_update}} (trigger names), all escaped.
--
-- One row per lease table:
--   floor          every token granted after the last `leasehold epoch` exceeds it; a new
--                  key's first token is floor + 1 (0 until an epoch was raised)
--   floor_wall_ms  when that epoch was raised (this machine's wall clock, ms)
--   grants         grants ever made on this table. The store copies it into the sidecar file
--                  `<db>-epoch`; a file whose count is below its sidecar's was restored from
--                  an older copy (see epoch.ts).
CREATE TABLE IF NOT EXISTS {{epoch}} (
  id            INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
  floor         INTEGER NOT NULL DEFAULT 0 CHECK (floor >= 0),
  floor_wall_ms INTEGER NOT NULL DEFAULT 0,
  grants        INTEGER NOT NULL DEFAULT 0
);
INSERT OR IGNORE INTO {{epoch}} (id) VALUES (1);

-- Counted by triggers, not by the store, so that every writer of the table counts — also a
-- process of an earlier version during a rolling upgrade.
CREATE TRIGGER IF NOT EXISTS {{count_insert}} AFTER INSERT ON {{table}}
BEGIN
  UPDATE {{epoch}} SET grants = grants + 1 WHERE id = 1;
END;
CREATE TRIGGER IF NOT EXISTS {{count_update}} AFTER UPDATE OF token ON {{table}}
WHEN NEW.token <> OLD.token
BEGIN
  UPDATE {{epoch}} SET grants = grants + 1 WHERE id = 1;
END;

-- A process of an earlier version inserts a new key with token 1, which after an epoch may
-- repeat a token issued before the restore. SQLite triggers cannot change NEW, so the insert
-- is refused instead (that process answers unavailable for new keys until it is upgraded).
-- This version inserts with floor + 1 and never fires it.
CREATE TRIGGER IF NOT EXISTS {{floor_guard}} BEFORE INSERT ON {{table}}
WHEN NEW.token <= (SELECT floor FROM {{epoch}} WHERE id = 1)
BEGIN
  SELECT RAISE(ABORT, 'leasehold: a new key must start above the fencing epoch floor; upgrade leasehold in this process');
END;
