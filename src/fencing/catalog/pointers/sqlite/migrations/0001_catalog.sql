-- The catalog's pointer store, version 1 (SQLite). {{pointer}}, {{history}}, {{object}} are
-- the quoted table names; the high-water mark per name lives in the SqliteFence tables.
-- Times are wall-clock milliseconds of this machine.

-- The visible object per name.
CREATE TABLE IF NOT EXISTS {{pointer}} (
  name         TEXT PRIMARY KEY NOT NULL,
  handle       TEXT NOT NULL,
  token        INTEGER NOT NULL,
  lease_key    TEXT NOT NULL,
  lease_id     TEXT NOT NULL,
  version      INTEGER NOT NULL CHECK (version > 0),
  size         INTEGER NOT NULL,
  checksum     TEXT NOT NULL,
  published_ms INTEGER NOT NULL
) STRICT;

-- Every applied publish, one row per (name, version).
CREATE TABLE IF NOT EXISTS {{history}} (
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
) STRICT;

-- Every object the catalog staged and has not yet collected. unreferenced_ms is NULL while
-- the pointer shows the object, else since when nothing has (the staged time for an object
-- never published): the collector's retention counts from it.
CREATE TABLE IF NOT EXISTS {{object}} (
  handle          TEXT PRIMARY KEY NOT NULL,
  name            TEXT NOT NULL,
  state           TEXT NOT NULL CHECK (state IN ('staged', 'published', 'tombstoned')),
  token           INTEGER NOT NULL,
  lease_id        TEXT NOT NULL,
  size            INTEGER,
  checksum        TEXT,
  staged_ms       INTEGER NOT NULL,
  unreferenced_ms INTEGER
) STRICT;
CREATE INDEX IF NOT EXISTS {{object_gc_index}} ON {{object}} (unreferenced_ms) WHERE unreferenced_ms IS NOT NULL;
