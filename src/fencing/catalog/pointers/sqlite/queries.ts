/**
 * The SQLite pointer store's statements. `{{pointer}}`, `{{history}}`, `{{object}}` are the
 * quoted table names; parameters are named (`@name`). Times are wall-clock ms of this machine.
 */

/** Records the catalog's applied migrations (per table prefix). */
export const CREATE_MIGRATIONS = `
CREATE TABLE IF NOT EXISTS {{migrations}} (
  name TEXT PRIMARY KEY NOT NULL,
  applied_ms INTEGER NOT NULL
) STRICT`;

/**
 * Params: table. One row when the table exists: whether the catalog is there, for a store
 * that does not migrate (every catalog version has its pointer table).
 */
export const CATALOG_PRESENT = `SELECT 1 AS present FROM sqlite_master WHERE type = 'table' AND name = @table`;

/** Params: handle, name, token, leaseId, now. A staged row, incomplete, unreferenced since now. */
export const REGISTER = `
INSERT INTO {{object}} (handle, name, state, token, lease_id, staged_ms, unreferenced_ms)
VALUES (@handle, @name, 'staged', @token, @leaseId, @now, @now)`;

/** Params: handle, size, checksum. Completes a staged row (only an incomplete, staged one). */
export const COMPLETE = `
UPDATE {{object}} SET size = @size, checksum = @checksum
WHERE handle = @handle AND state = 'staged' AND size IS NULL`;

/** Params: handle. Returns name, state, size, checksum (or no row). */
export const SELECT_OBJECT = `SELECT name, state, size, checksum FROM {{object}} WHERE handle = @handle`;

/** Params: name. Returns the pointer row (or none). */
export const SELECT_POINTER = `SELECT * FROM {{pointer}} WHERE name = @name`;

/** Params: all pointer columns. The name's first pointer; its mark is the token. */
export const INSERT_POINTER = `
INSERT INTO {{pointer}} (name, handle, token, lease_key, lease_id, version, size, checksum, published_ms, high_water)
VALUES (@name, @handle, @token, @leaseKey, @leaseId, @version, @size, @checksum, @now, @token)`;

/** Params: all pointer columns. Moves the pointer; the mark goes to the token. */
export const UPDATE_POINTER = `
UPDATE {{pointer}} SET handle = @handle, token = @token, lease_id = @leaseId, version = @version,
  size = @size, checksum = @checksum, published_ms = @now, high_water = @token,
  previous_handle = handle
WHERE name = @name`;

/**
 * Params: name, handle, token, leaseKey, leaseId, expected (NULL for any), strict (0 | 1),
 * now. The common publish in one statement (decision 024): the name has a pointer, the token
 * may publish (the fence's rule against the row's mark), under the name's key, at the expected
 * version, of a complete, live object of this name. Then it moves the pointer and its mark
 * and returns version, previous_handle, size, checksum (SET reads the row as it was, so
 * previous_handle is the handle shown before); otherwise it changes nothing and returns no
 * row, and the full decision runs. Only without an idempotency key: a key already applied is
 * `duplicate` before anything else.
 */
export const PUBLISH_FAST = `
UPDATE {{pointer}} AS p SET handle = @handle, token = @token, lease_id = @leaseId,
  version = p.version + 1, size = o.size, checksum = o.checksum, published_ms = @now,
  high_water = @token, previous_handle = p.handle
FROM {{object}} AS o
WHERE p.name = @name AND o.handle = @handle AND o.name = @name AND o.state <> 'tombstoned'
  AND o.size IS NOT NULL AND o.checksum IS NOT NULL
  AND (p.high_water < @token OR (@strict = 0 AND p.high_water = @token))
  AND p.lease_key = @leaseKey AND (@expected IS NULL OR p.version = @expected)
RETURNING version, previous_handle`;

/** Params: name. The history row of the pointer just moved by PUBLISH_FAST (no idempotency key). */
export const INSERT_HISTORY_OF_POINTER = `
INSERT INTO {{history}} (name, version, handle, token, lease_key, lease_id, size, checksum, published_ms, idempotency_key)
SELECT name, version, handle, token, lease_key, lease_id, size, checksum, published_ms, NULL
FROM {{pointer}} WHERE name = @name`;

/** Params: handle. The pointer shows it now: referenced, so never collectable. */
export const MARK_REFERENCED = `
UPDATE {{object}} SET state = 'published', unreferenced_ms = NULL WHERE handle = @handle`;

/**
 * Params: handle, now. The pointer moved away from it: the retention starts now. (Two
 * statements are cheaper than one over both rows: decision 035.)
 */
export const MARK_UNREFERENCED = `UPDATE {{object}} SET unreferenced_ms = @now WHERE handle = @handle`;

/**
 * Params: name. The mark of a name without a pointer, as the fence table holds it (names
 * fenced by a catalog from before version 2; none otherwise).
 */
export const SELECT_FENCE_MARK = `SELECT hwm FROM {{fence}} WHERE scope = @name`;

/**
 * Params: name, mark. A claim's step on a published name: the mark in its pointer row rises to
 * `mark` when it is at most that (1 change), else nothing changes.
 */
export const CLAIM_POINTER = `
UPDATE {{pointer}} SET high_water = @mark WHERE name = @name AND high_water <= @mark`;

/**
 * Params: name, mark. A claim's step on a name with no pointer yet: its claim row (which a
 * first publish reads) rises to `mark` when it is at most that.
 */
export const CLAIM_FIRST = `
INSERT INTO {{claim_mark}} (name, high_water) VALUES (@name, @mark)
ON CONFLICT (name) DO UPDATE SET high_water = excluded.high_water
WHERE {{claim_mark}}.high_water <= excluded.high_water`;

/** Params: name. The mark a claim installed on a name with no pointer yet (or no row). */
export const SELECT_CLAIM_MARK = `SELECT high_water FROM {{claim_mark}} WHERE name = @name`;

/** Params: name, token, idempotencyKey. One row when this key was applied under this token (the fence's rule). */
export const SELECT_OP = `
SELECT 1 AS seen FROM {{fence_op}} WHERE scope = @name AND token = @token AND op_id = @idempotencyKey`;

/** Params: name, token, idempotencyKey. Records an applied idempotency key. */
export const INSERT_OP = `INSERT INTO {{fence_op}} (scope, token, op_id) VALUES (@name, @token, @idempotencyKey)`;

/** Params: all history columns. */
export const INSERT_HISTORY = `
INSERT INTO {{history}} (name, version, handle, token, lease_key, lease_id, size, checksum, published_ms, idempotency_key)
VALUES (@name, @version, @handle, @token, @leaseKey, @leaseId, @size, @checksum, @now, @idempotencyKey)`;

/** Params: name, token, idempotencyKey. The version a duplicate publish applied. */
export const SELECT_DUPLICATE = `
SELECT version FROM {{history}} WHERE name = @name AND token = @token AND idempotency_key = @idempotencyKey`;

/** Params: name, limit. Newest first. */
export const SELECT_HISTORY = `SELECT * FROM {{history}} WHERE name = @name ORDER BY version DESC LIMIT @limit`;

/** Params: lo, hi (the prefix range), limit. */
export const SELECT_LIST = `
SELECT * FROM {{pointer}} WHERE name >= @lo AND name < @hi ORDER BY name LIMIT @limit`;

/**
 * The history rows the collector has not read (past each name's mark), from the row at the
 * mark on (its handle is what the next row replaced), with the handle each one replaced.
 */
const UNREAD_HISTORY = `
WITH names AS (
  SELECT p.name, COALESCE(m.version, 0) AS wm
  FROM {{pointer}} p LEFT JOIN {{gc_mark}} m ON m.name = p.name
  WHERE p.version > COALESCE(m.version, 0)
), unread AS (
  SELECT h.name, n.wm, h.version, h.handle, h.published_ms,
    lag(h.handle) OVER (PARTITION BY h.name ORDER BY h.version) AS replaced
  FROM names n JOIN {{history}} h ON h.name = n.name AND h.version >= n.wm
)`;

/**
 * No params. The collector's first step (decision 028): every object a publish replaced since
 * the collector last read the history stopped being referenced at that publish (the latest
 * one, if it was visible more than once); its retention starts then.
 */
export const START_RETENTION = `${UNREAD_HISTORY}, ends AS (
  SELECT replaced AS handle, max(published_ms) AS t FROM unread
  WHERE version > wm AND replaced IS NOT NULL AND replaced <> handle
  GROUP BY replaced
)
UPDATE {{object}} AS o SET unreferenced_ms = e.t FROM ends AS e
WHERE o.handle = e.handle AND o.state <> 'tombstoned'
  AND (o.unreferenced_ms IS NULL OR o.unreferenced_ms < e.t)`;

/** No params. Moves each name's mark to the last history row read (after START_RETENTION). */
export const MOVE_GC_MARKS = `${UNREAD_HISTORY}
INSERT INTO {{gc_mark}} (name, version)
SELECT name, max(version) FROM unread WHERE true GROUP BY name
ON CONFLICT (name) DO UPDATE SET version = max(version, excluded.version)`;

/** No params. Lets this transaction tombstone rows (migration 0004's guard); removed before commit. */
export const BEGIN_GC_SESSION = `INSERT INTO {{gc_session}} (id) VALUES (1)`;

/** No params. */
export const END_GC_SESSION = `DELETE FROM {{gc_session}}`;

/**
 * Params: cutoff, limit. Marks rows unreferenced since before the cutoff that no pointer
 * shows. Runs inside the collector's immediate transaction, so no publish interleaves.
 */
export const TOMBSTONE = `
UPDATE {{object}} SET state = 'tombstoned'
WHERE handle IN (
  SELECT o.handle FROM {{object}} o
  WHERE o.unreferenced_ms IS NOT NULL AND o.unreferenced_ms < @cutoff AND o.state <> 'tombstoned'
    AND NOT EXISTS (SELECT 1 FROM {{pointer}} p WHERE p.handle = o.handle)
  LIMIT @limit
)`;

/** Params: limit. Every tombstoned row (a crashed collection leaves some). */
export const SELECT_TOMBSTONED = `
SELECT handle, COALESCE(size, 0) AS size FROM {{object}} WHERE state = 'tombstoned' LIMIT @limit`;

/** Params: handle. */
export const FORGET = `DELETE FROM {{object}} WHERE handle = @handle AND state = 'tombstoned'`;

/** Params: handle. */
export const IS_REGISTERED = `SELECT 1 AS x FROM {{object}} WHERE handle = @handle`;
