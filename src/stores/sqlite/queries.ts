/**
 * The SQLite statements of the lease store, one per operation. `{{table}}` is replaced by
 * the escaped table name once, at open. Times: `@nowUs` / `@expiresUs` are the machine's
 * monotonic clock in microseconds, valid only with `@bootId`; `@expiresWallMs` is display only.
 */

/**
 * Params: key. Returns: lease_id, owner_id, token, token_block, expires_us, boot_id, value
 * (or no row). token_block NULL means 1 (migration 0002).
 */
export const SELECT_LEASE = `
SELECT lease_id, owner_id, token, token_block, expires_us, boot_id, value, lock_delay_us
FROM {{table}} WHERE key = @key`;

/**
 * The grant, in one atomic statement: insert with the epoch floor + 1 (migration 0003; 1
 * until an epoch was raised), or take over a free, released,
 * expired or previous-boot row with the token after the last grant's block
 * (token + token_block, NULL = 1). `@tokenBlock` is this grant's block (NULL for 1). The
 * statement writes nothing when the block would end above int64's maximum: `@roomTop` is that
 * maximum − (block − 1), so the bound is compared without overflowing (SQLite turns an
 * integer overflow into a REAL). Returns: token — or no row when a live holder remains or the
 * token space is exhausted (the caller re-reads; a busy answer never reaches this statement
 * in the common case).
 */
export const ACQUIRE = `
INSERT INTO {{table}} (key, lease_id, owner_id, token, token_block, expires_us, boot_id, expires_wall_ms, value, lock_delay_us)
VALUES (@key, @leaseId, @ownerId, (SELECT floor + 1 FROM {{epoch}} WHERE id = 1), @tokenBlock, @expiresUs, @bootId, @expiresWallMs, @value, @lockDelayUs)
ON CONFLICT (key) DO UPDATE SET
  lease_id = excluded.lease_id,
  owner_id = excluded.owner_id,
  token = {{table}}.token + coalesce({{table}}.token_block, 1),
  token_block = excluded.token_block,
  expires_us = excluded.expires_us,
  boot_id = excluded.boot_id,
  expires_wall_ms = excluded.expires_wall_ms,
  value = excluded.value,
  lock_delay_us = excluded.lock_delay_us
WHERE ({{table}}.lease_id IS NULL
   OR {{table}}.boot_id <> @bootId
   OR {{table}}.expires_us + (CASE WHEN @ignoreLockDelay = 1 THEN 0 ELSE {{table}}.lock_delay_us END) <= @nowUs)
  AND {{table}}.token <= @roomTop - coalesce({{table}}.token_block, 1)
RETURNING token`;

/** Params: key, leaseId, token, bootId, nowUs, expiresUs, expiresWallMs. Changes 1 row or 0 (lost). */
export const RENEW = `
UPDATE {{table}} SET expires_us = @expiresUs, expires_wall_ms = @expiresWallMs
WHERE key = @key AND lease_id = @leaseId AND token = @token
  AND boot_id = @bootId AND expires_us > @nowUs`;

/**
 * RENEW with positional parameters, for renewMany: expiresUs, expiresWallMs, key, leaseId,
 * token, bootId, nowUs. Changes 1 row or 0 (lost). Bound by position because better-sqlite3
 * looks each named parameter up on the object by name (decision 035).
 */
export const RENEW_BY_POSITION = `
UPDATE {{table}} SET expires_us = ?, expires_wall_ms = ?
WHERE key = ? AND lease_id = ? AND token = ?
  AND boot_id = ? AND expires_us > ?`;

/** Params: key, leaseId, token. Keeps the row and its token. Changes 1 row or 0 (not owner). */
export const RELEASE = `
UPDATE {{table}} SET lease_id = NULL, owner_id = NULL, value = NULL, expires_us = 0, expires_wall_ms = 0
WHERE key = @key AND lease_id = @leaseId AND token = @token`;

/** Params: prefix, bootId, nowUs, limit. Returns live rows whose key starts with prefix, in key order. */
export const LIST_LIVE = `
SELECT key, lease_id, owner_id, token, token_block, expires_us, boot_id, value
FROM {{table}}
WHERE key >= @prefix AND substr(key, 1, length(@prefix)) = @prefix
  AND lease_id IS NOT NULL AND boot_id = @bootId AND expires_us > @nowUs
ORDER BY key LIMIT @limit`;

/** Records applied migrations, per lease table. */
export const CREATE_MIGRATIONS_TABLE = `
CREATE TABLE IF NOT EXISTS leasehold_migrations (
  name TEXT NOT NULL PRIMARY KEY,
  applied_wall_ms INTEGER NOT NULL
)`;
