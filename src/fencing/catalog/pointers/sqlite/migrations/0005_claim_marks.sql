-- The catalog's pointer store, version 5 (SQLite): claims (claim before start). A claim on a
-- published name raises the mark in its pointer row. A name never published has no pointer
-- row, and the fence table is closed to writes since version 2 (so that older leasehold
-- versions cannot publish): its claim is kept here, and the name's first publish reads it
-- with the fence table's mark. Old versions never read this table; a claim they cannot see
-- only matters to a name they publish for the first time, and version 2 refuses their
-- publishes anyway.
CREATE TABLE IF NOT EXISTS {{claim_mark}} (
  name       TEXT PRIMARY KEY NOT NULL,
  high_water INTEGER NOT NULL CHECK (high_water > 0)
) STRICT, WITHOUT ROWID;
