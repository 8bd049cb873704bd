/**
 * The one call on a better-sqlite3 `Database` that opening a file needs: structural, so that the
 * store (with its `SqliteDatabase`) and the fence (with better-sqlite3's own type) both fit.
 */
export interface SqlitePragmas {
  pragma(sql: string, options?: { readonly simple?: boolean }): unknown;
}

/**
 * Runs `steps` (the opening steps of a database file: journal mode, sync policy, migrations)
 * and retries them while SQLite answers SQLITE_BUSY, until `busyTimeoutMs` has passed.
 *
 * Why: switching a file to WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY at once
 * (without its busy handler) when another process opens the same new file at the same moment.
 * Seen with two writer processes opening one new catalog file together. The pause is
 * synchronous because the constructors that call this are, like better-sqlite3's.
 */
export function retryWhileBusy(busyTimeoutMs: number, steps: () => void): void {
  const deadline = performance.now() + Math.max(busyTimeoutMs, 100);
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let attempt = 0; ; attempt++) {
    try {
      steps();
      return;
    } catch (err) {
      const busy = (err as { code?: string }).code?.startsWith('SQLITE_BUSY') === true;
      if (!busy || performance.now() >= deadline) throw err;
      Atomics.wait(pause, 0, 0, Math.min(50, 5 * (attempt + 1)));
    }
  }
}

/**
 * Puts `db` in WAL mode with `synchronous = FULL` (every commit fsync'd before it returns), the
 * mode is switched only when it is not WAL already (reading it takes no lock). Call it inside
 * {@link retryWhileBusy}.
 */
export function useDurableWal(db: SqlitePragmas): void {
  if (String(db.pragma('journal_mode', { simple: true })).toLowerCase() !== 'wal') {
    db.pragma('journal_mode = WAL');
  }
  db.pragma('synchronous = FULL');
}
