-- The catalog's pointer store, version 2 (SQLite): the name's high-water mark kept in its
-- pointer row, and the pointer and history tables without a separate rowid b-tree (decision
-- 021). Measured before: a publish wrote 5.2 pages to the WAL (the pointer, the history
-- table and its primary-key index, the object rows and the collector's index; and the fence
-- row's page whenever the mark moved) against 1 for the bare fenced UPDATE; every page is
-- 4 KiB to write and fsync. Now the fence row is never written (the mark moves with the
-- pointer row it lives in) and pointer and history are one b-tree each: 4.8 pages.

CREATE TABLE {{pointer_v2}} (
  name         TEXT PRIMARY KEY NOT NULL,
  handle       TEXT NOT NULL,
  token        INTEGER NOT NULL,
  lease_key    TEXT NOT NULL,
  lease_id     TEXT NOT NULL,
  version      INTEGER NOT NULL CHECK (version > 0),
  size         INTEGER NOT NULL,
  checksum     TEXT NOT NULL,
  published_ms INTEGER NOT NULL,
  -- The highest token a publish of this name was applied with (every applied publish sets
  -- it to its own token); catalogs from before this migration take the fence's mark if higher.
  high_water   INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
INSERT INTO {{pointer_v2}}
  SELECT p.name, p.handle, p.token, p.lease_key, p.lease_id, p.version, p.size, p.checksum,
         p.published_ms, max(p.token, COALESCE((SELECT f.hwm FROM {{fence}} f WHERE f.scope = p.name), 0))
  FROM {{pointer}} p;
DROP TABLE {{pointer}};
ALTER TABLE {{pointer_v2}} RENAME TO {{pointer}};

CREATE TABLE {{history_v2}} (
  name            TEXT NOT NULL,
  version         INTEGER NOT NULL,
  handle          TEXT NOT NULL,
  token           INTEGER NOT NULL,
  lease_key       TEXT NOT NULL,
  lease_id        TEXT NOT NULL,
  size            INTEGER NOT NULL,
  checksum        TEXT NOT NULL,
  published_ms    INTEGER NOT NULL,
  idempotency_key TEXT,
  PRIMARY KEY (name, version)
) STRICT, WITHOUT ROWID;
INSERT INTO {{history_v2}}
  SELECT name, version, handle, token, lease_key, lease_id, size, checksum, published_ms, idempotency_key
  FROM {{history}};
DROP TABLE {{history}};
ALTER TABLE {{history_v2}} RENAME TO {{history}};

-- Publishes of version 1 advanced the fence table's mark, which publishes no longer read for
-- a published name: a process of an older leasehold publishing after this migration would be
-- checked against a stale mark. Its advance is refused instead (an error, never a publish):
-- upgrade every writer of the catalog. This version only reads the fence table.
CREATE TRIGGER {{fence_closed_insert}} BEFORE INSERT ON {{fence}}
BEGIN
  SELECT RAISE(ABORT, 'this catalog was migrated to pointer store version 2: upgrade leasehold to publish');
END;
CREATE TRIGGER {{fence_closed_update}} BEFORE UPDATE ON {{fence}}
BEGIN
  SELECT RAISE(ABORT, 'this catalog was migrated to pointer store version 2: upgrade leasehold to publish');
END;
