-- leasehold SQLite schema, version 1. Forward-only; {{table}} is the escaped table name.
-- Rows are kept after release so that tokens never reset (DESIGN §2).
-- expires_us is this machine's CLOCK_MONOTONIC in microseconds; it is only meaningful while
-- boot_id matches the current boot, so a row from an earlier boot is treated as expired.
CREATE TABLE IF NOT EXISTS {{table}} (
  key             TEXT    NOT NULL PRIMARY KEY,
  lease_id        TEXT,
  owner_id        TEXT,
  token           INTEGER NOT NULL DEFAULT 0 CHECK (token >= 0),
  expires_us      INTEGER NOT NULL DEFAULT 0,
  boot_id         TEXT    NOT NULL DEFAULT '',
  expires_wall_ms INTEGER NOT NULL DEFAULT 0,
  value           TEXT
) WITHOUT ROWID;
