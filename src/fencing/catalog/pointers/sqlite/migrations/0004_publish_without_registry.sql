-- The catalog's pointer store, version 4 (SQLite): the common publish writes no registry row;
-- the collector reads, from the history, when each replaced object stopped being visible
-- (decision 028, as on PostgreSQL). A publish and a collection never interleave here (both
-- take the database's write lock), so the collector needs no locks of its own: it reads the
-- history past each name's mark, writes the replaced objects' retention start, moves the
-- marks, then tombstones as before, all in one immediate transaction.
--
-- A collector of version 3 or older reads retention starts that publishes no longer write, and
-- could delete an object its publish has just replaced. It is refused: only a collector that
-- holds a row in {{gc_session}} (inserted and deleted inside its own transaction, so no other
-- connection ever sees it) may tombstone a row.

-- How far the collector has read each name's history. Names published before this version
-- start at their current version (their publishes wrote the retention starts themselves).
CREATE TABLE IF NOT EXISTS {{gc_mark}} (
  name    TEXT PRIMARY KEY NOT NULL,
  version INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
INSERT OR IGNORE INTO {{gc_mark}} (name, version) SELECT name, version FROM {{pointer}};

CREATE TABLE IF NOT EXISTS {{gc_session}} (id INTEGER PRIMARY KEY) STRICT;

CREATE TRIGGER IF NOT EXISTS {{tombstone_guard}} BEFORE UPDATE OF state ON {{object}}
  WHEN NEW.state = 'tombstoned' AND OLD.state <> 'tombstoned'
    AND NOT EXISTS (SELECT 1 FROM {{gc_session}})
BEGIN
  SELECT RAISE(ABORT, 'tombstone refused: this catalog (pointer store migration 0004) may be collected only by a leasehold that has that migration; upgrade the process that runs gc');
END;
