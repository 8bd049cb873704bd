import { resolve } from 'node:path';
import { LeaseholdError } from '../../core/errors.js';
import { retryWhileBusy } from '../../drivers/sqlite/open-file.js';
import { resolvePruneOptions, type PruneOptions, type PruneReport } from '../retention-report.js';
import { openSqliteDatabase } from './client.js';
import { machineBootId, machineMonotonicUs } from './machine-time.js';
import { sqliteLeaseTableExists } from './migrate.js';

/**
 * Retention for a SQLite lease table: deletes the rows of released keys and of keys expired
 * longer than a grace period, and raises the table's epoch floor (`<table>_epoch`, migration
 * 0003) to at least the top of every deleted row's last token block, in the same transaction.
 * A new key's first token is `floor + 1` (the grant reads the floor in its own statement), so
 * a later grant of a deleted key — or of any key never seen — gets a token above every token
 * that key was ever given. Raising the floor touches no live row: grants of existing keys
 * count from the row's own token, renewals never read the floor.
 *
 * The floor's "raised at" time is left as it was: the epoch rule then counts the floor's
 * growth from an earlier time, a larger (still safe) floor at the next `leasehold epoch`.
 */

/** Deletes one batch and returns the tops of the deleted rows' last blocks. */
const DELETE_BATCH = `
DELETE FROM {{table}} WHERE key IN (
  SELECT key FROM {{table}}
  WHERE lease_id IS NULL
     OR (boot_id = @bootId AND expires_us + lock_delay_us <= @nowUs - @graceUs)
     OR (boot_id <> @bootId AND expires_wall_ms <= @nowWallMs - @graceMs)
  LIMIT @batch)
RETURNING token + coalesce(token_block, 1) - 1 AS top`;

/** Raises the floor to @top when it is below; returns the floor. */
const RAISE_FLOOR = `
UPDATE {{epoch}} SET floor = max(floor, @top) WHERE id = 1 RETURNING floor`;

const READ_FLOOR = `SELECT floor FROM {{epoch}} WHERE id = 1`;

/** Options of {@link pruneSqliteKeys}. */
export interface SqlitePruneOptions extends PruneOptions {
  /** The database file. It must exist and hold the lease table. */
  readonly path: string;
  /** The lease table. Defaults to `leasehold_lease`. */
  readonly table?: string;
  /** Wait for another process's write lock at most this long. Defaults to 5000 ms. */
  readonly busyTimeoutMs?: number;
}

/**
 * Deletes released and long-expired keys of a SQLite lease table in batches (one IMMEDIATE
 * transaction each, so grants in other processes wait for one batch at most), raising the
 * epoch floor over every deleted token in the same transaction. Safe to run while stores use
 * the file. Throws `ERR_UNAVAILABLE` when the file or table does not exist or cannot be
 * written, `ERR_INVALID_ARGUMENT` for bad options.
 */
export function pruneSqliteKeys(options: SqlitePruneOptions): Promise<PruneReport> {
  return Promise.resolve().then(() => pruneSqlite(options, true));
}

/**
 * The pass itself. `raiseFloor: false` exists only so that a test can show that a prune which
 * forgets the floor hands out old tokens again (and that the test notices).
 */
export function pruneSqlite(options: SqlitePruneOptions, raiseFloor: boolean): PruneReport {
  const { olderThanMs, batch, maxDeleted } = resolvePruneOptions(options);
  const path = resolve(options.path);
  const table = options.table ?? 'leasehold_lease';
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  if (!sqliteLeaseTableExists(path, table)) {
    throw new LeaseholdError('ERR_UNAVAILABLE', `no lease table ${table} in ${path}`);
  }
  const names = (sql: string): string =>
    sql.replaceAll('{{table}}', `"${table}"`).replaceAll('{{epoch}}', `"${table}_epoch"`);
  const db = openSqliteDatabase(path, { timeout: busyTimeoutMs, fileMustExist: true });
  try {
    db.defaultSafeIntegers(true);
    const del = db.prepare<[Record<string, unknown>], { top: bigint }>(names(DELETE_BATCH));
    const raise = db.prepare<[{ top: bigint }], { floor: bigint }>(names(RAISE_FLOOR));
    const read = db.prepare<[], { floor: bigint }>(names(READ_FLOOR));
    const bootId = machineBootId();
    const graceUs = BigInt(olderThanMs) * 1000n;
    const pass = db.transaction((limit: number) => {
      const rows = del.all({
        bootId,
        nowUs: machineMonotonicUs(),
        graceUs,
        nowWallMs: BigInt(Date.now()),
        graceMs: BigInt(olderThanMs),
        batch: limit,
      });
      let top = 0n;
      for (const r of rows) if (r.top > top) top = r.top;
      const floor = raiseFloor ? raise.get({ top })!.floor : read.get()!.floor;
      return { deleted: rows.length, floor };
    });
    let deleted = 0;
    let batches = 0;
    let floor = read.get()?.floor ?? 0n;
    while (deleted < maxDeleted) {
      const limit = Math.min(batch, maxDeleted - deleted);
      let r = { deleted: 0, floor };
      retryWhileBusy(busyTimeoutMs, () => {
        r = pass.immediate(limit);
      });
      batches++;
      deleted += r.deleted;
      floor = r.floor;
      if (r.deleted < limit) break;
    }
    return { deleted, floor, batches };
  } catch (err) {
    if (err instanceof LeaseholdError) throw err;
    throw new LeaseholdError('ERR_UNAVAILABLE', `prune: cannot prune ${path}: ${String(err)}`, {
      cause: err,
    });
  } finally {
    db.close();
  }
}
