import {
  closeSync,
  constants,
  fsyncSync,
  openSync,
  readSync,
  utimesSync,
  writeSync,
} from 'node:fs';
import { resolve } from 'node:path';
import { LeaseholdError } from '../../core/errors.js';
import { parseToken } from '../../core/validate.js';
import { epochFloor } from '../epoch-floor.js';
import { openSqliteDatabase, type SqliteDatabase, type SqliteStatement } from './client.js';
import { sqliteLeaseTableExists } from './migrate.js';
import { retryWhileBusy } from '../../drivers/sqlite/open-file.js';

/**
 * The fencing epoch of a SQLite lease table, and how a store notices that its file was
 * restored from an older copy.
 *
 * The sidecar file `<db>-epoch` lives next to the database and is never part of it:
 *
 *     <grants, 20 digits> <floor, 20 digits> <floor set at, wall ms, 20 digits>\n
 *
 * `grants` is the table's count of grants (kept by triggers, migration 0003). Each grant
 * transaction, holding SQLite's write lock, first reads the count and the sidecar: a sidecar
 * that counts more grants than the file means the file lost grants — it was copied back from
 * a backup — and the grant is refused (unavailable) until `leasehold epoch` raises the floor.
 * Then it writes the count it read (the grants already committed, not its own, so that a
 * crash before its commit cannot leave the sidecar ahead of the file). The sidecar is not
 * fsync'd per grant: after a power cut it can only be behind the file, never ahead.
 *
 * What it cannot notice: a copy restored together with its sidecar, or a copy taken less than
 * two grants before the loss. The epoch floor itself does not rely on the sidecar.
 */

/** The sidecar's name for a database file. */
export function epochSidecarPath(dbPath: string): string {
  return `${dbPath}-epoch`;
}

const WIDTH = 20;
const RECORD = WIDTH * 3 + 3;

interface Sidecar {
  readonly grants: bigint;
  readonly floor: bigint;
  readonly atMs: bigint;
}

function readSidecar(fd: number): Sidecar | undefined {
  const buf = Buffer.alloc(RECORD);
  const n = readSync(fd, buf, 0, RECORD, 0);
  const m = /^(\d{20}) (\d{20}) (\d{20})\n$/.exec(buf.toString('latin1', 0, n));
  if (m === null) return undefined;
  return { grants: BigInt(m[1]!), floor: BigInt(m[2]!), atMs: BigInt(m[3]!) };
}

const digits = (n: bigint): string => n.toString().padStart(WIDTH, '0');

function openSidecar(dbPath: string): number {
  return openSync(epochSidecarPath(dbPath), constants.O_RDWR | constants.O_CREAT, 0o644);
}

/** The SQL names of a lease table's epoch objects (migration 0003). */
export function epochNames(table: string): Record<string, string> {
  return {
    '{{epoch}}': `"${table}_epoch"`,
    '{{floor_guard}}': `"${table}_floor_guard"`,
    '{{count_insert}}': `"${table}_count_insert"`,
    '{{count_update}}': `"${table}_count_update"`,
  };
}

/**
 * The restore check a store runs inside each grant transaction (see the module comment).
 * Reads and writes the sidecar with positioned I/O on one descriptor kept open.
 */
export class RestoreGuard {
  private readonly count: SqliteStatement<[], { grants: bigint }>;
  private fd: number | undefined;

  constructor(
    db: SqliteDatabase,
    table: string,
    private readonly dbPath: string,
  ) {
    this.count = db.prepare(`SELECT grants FROM "${table}_epoch" WHERE id = 1`);
  }

  /** Throws `ERR_UNAVAILABLE` when the file was restored; call with the write lock held. */
  check(): void {
    const grants = this.count.get()?.grants ?? 0n;
    let fd = this.fd;
    try {
      fd ??= this.fd = openSidecar(this.dbPath);
    } catch {
      return; // a read-only directory: nothing to compare with (the floor still holds)
    }
    const seen = readSidecar(fd);
    if (seen !== undefined && seen.grants > grants)
      throw restoredError(this.dbPath, seen.grants, grants);
    if (seen === undefined) {
      writeSync(fd, `${digits(grants)} ${digits(0n)} ${digits(0n)}\n`, 0, 'latin1');
    } else if (grants > seen.grants) {
      writeSync(fd, digits(grants), 0, 'latin1');
    }
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}

function restoredError(path: string, sidecar: bigint, file: bigint): LeaseholdError {
  return new LeaseholdError(
    'ERR_UNAVAILABLE',
    `the SQLite lease file ${path} was restored from an older copy: its sidecar ${epochSidecarPath(path)} ` +
      `counts ${sidecar} grants, the file only ${file}, so tokens granted since the copy could be ` +
      `handed out again. Grants are refused until the fencing epoch is raised: run ` +
      `\`leasehold epoch --store sqlite:${path}\``,
  );
}

/** Options for {@link advanceSqliteFencingEpoch}. */
export interface SqliteEpochOptions {
  /** The database file. It must exist and hold the lease table. */
  readonly path: string;
  /** The lease table. Defaults to `leasehold_lease`. */
  readonly table?: string;
  /** A floor known from outside the file, e.g. a fenced resource's high-water mark. */
  readonly atLeast?: bigint | string;
  /** Wait for another process's write lock at most this long. Defaults to 5000 ms. */
  readonly busyTimeoutMs?: number;
}

/** What {@link advanceSqliteFencingEpoch} did. */
export interface SqliteEpochReport {
  /** Every later grant gets a token greater than this. */
  readonly floor: bigint;
  /** Keys whose counter was raised (and whose holder was cleared). */
  readonly rowsRaised: number;
  /** Whether the sidecar showed that the file had been restored from an older copy. */
  readonly restoreNoticed: boolean;
}

/**
 * Advances the fencing epoch of a SQLite lease table after its file was restored from a copy:
 * every later token exceeds every token issued before, including those the copy never saw.
 *
 * In one IMMEDIATE transaction (other processes' grants wait): the floor
 * F = {@link epochFloor} of this machine's clock, the highest token in the file, the floor of
 * the previous epoch (from the file and from the sidecar, which a restore does not roll back)
 * and `atLeast`; every key's counter is raised to F and its holder cleared (a restored lease
 * is not trusted); keys created later start at F + 1. Then the sidecar is reset to the file's
 * grant count and fsync'd, which lifts the restore check. Running it again is harmless.
 *
 * Throws `ERR_UNAVAILABLE` when the file or its lease table does not exist (it creates
 * neither) or cannot be written.
 */
export async function advanceSqliteFencingEpoch(
  options: SqliteEpochOptions,
): Promise<SqliteEpochReport> {
  const path = resolve(options.path);
  const table = options.table ?? 'leasehold_lease';
  const atLeast = options.atLeast === undefined ? 0n : parseToken(options.atLeast, 'atLeast');
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  if (!sqliteLeaseTableExists(path, table)) {
    throw new LeaseholdError(
      'ERR_UNAVAILABLE',
      `no lease table ${table} in ${path}; nothing to raise (a new file needs no epoch)`,
    );
  }
  // Opening a store applies the migrations (a file restored from before migration 0003 has
  // no epoch table yet); it is closed before the epoch's own connection writes.
  const { SqliteLeaseStore } = await import('./store.js');
  await new SqliteLeaseStore({ path, table, busyTimeoutMs }).close();
  const db = openSqliteDatabase(path, { timeout: busyTimeoutMs, fileMustExist: true });
  let fd: number | undefined;
  try {
    db.defaultSafeIntegers(true);
    retryWhileBusy(busyTimeoutMs, () => db.pragma('synchronous = FULL'));
    fd = openSidecar(path);
    const sidecar = readSidecar(fd);
    const epochTable = `"${table}_epoch"`;
    const lease = `"${table}"`;
    const tx = db.transaction(() => {
      const row = db
        .prepare(`SELECT floor, floor_wall_ms, grants FROM ${epochTable} WHERE id = 1`)
        .get() as { floor: bigint; floor_wall_ms: bigint; grants: bigint };
      const { highest } = db
        .prepare(
          `SELECT coalesce(max(token + coalesce(token_block, 1) - 1), 0) AS highest FROM ${lease}`,
        )
        .get() as { highest: bigint };
      const nowMs = BigInt(Date.now());
      const previous = [{ floor: row.floor, atMs: row.floor_wall_ms }];
      if (sidecar !== undefined) previous.push({ floor: sidecar.floor, atMs: sidecar.atMs });
      const floor = epochFloor({ nowMs, highest, previous, atLeast });
      // F > every top, so the token-block guard (migration 0002) never fires here.
      const raised = db
        .prepare(
          `UPDATE ${lease} SET token = @floor, token_block = NULL, lease_id = NULL, owner_id = NULL,
             value = NULL, expires_us = 0, expires_wall_ms = 0`,
        )
        .run({ floor });
      const after = db
        .prepare(
          `UPDATE ${epochTable} SET floor = @floor, floor_wall_ms = @nowMs WHERE id = 1 RETURNING grants`,
        )
        .get({ floor, nowMs }) as { grants: bigint };
      return {
        floor,
        nowMs,
        grants: after.grants,
        rowsRaised: raised.changes,
        restoreNoticed: sidecar !== undefined && sidecar.grants > row.grants,
      };
    });
    const r = tx.immediate();
    writeSync(fd, `${digits(r.grants)} ${digits(r.floor)} ${digits(r.nowMs)}\n`, 0, 'latin1');
    fsyncSync(fd);
    // Holders were cleared: wake waiters in other processes now rather than at their next poll
    // (they watch `<db>-notify`, decision 003). Best effort, like every notification.
    try {
      const now = new Date();
      utimesSync(`${path}-notify`, now, now);
    } catch {
      // no waiter ever created it
    }
    return { floor: r.floor, rowsRaised: r.rowsRaised, restoreNoticed: r.restoreNoticed };
  } catch (err) {
    if (err instanceof LeaseholdError) throw err;
    throw new LeaseholdError(
      'ERR_UNAVAILABLE',
      `epoch: cannot raise the floor in ${path}: ${String(err)}`,
      {
        cause: err,
      },
    );
  } finally {
    if (fd !== undefined) closeSync(fd);
    db.close();
  }
}
