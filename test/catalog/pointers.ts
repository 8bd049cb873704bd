import Database from 'better-sqlite3';
import pg from 'pg';
import type { PgPool, PgPoolClient } from '../../src/stores/postgres/client.js';
import type { PointerStore } from '../../src/fencing/catalog/pointer-store.js';
import { PostgresPointerStore } from '../../src/fencing/catalog/pointers/postgres/index.js';
import { SqlitePointerStore } from '../../src/fencing/catalog/pointers/sqlite/store.js';
import { PostgresFence } from '../../src/fencing/postgres.js';
import { SqliteFence } from '../../src/fencing/sqlite.js';
import { retryWhileBusy, useDurableWal } from '../../src/stores/sqlite/open-file.js';

/** Which pointer store a writer process or a test opens. */
export type PointerConfig =
  | { readonly kind: 'sqlite'; readonly path: string }
  | { readonly kind: 'postgres'; readonly url: string; readonly schema: string };

/**
 * Opens the pointer store. `inTransaction` (when given) runs inside every publish
 * transaction, after the pointer moved and before COMMIT: SQLite through a TEMP trigger on
 * this connection only, PostgreSQL just before the COMMIT is sent on a real pool's connection.
 */
export function openPointers(
  config: PointerConfig,
  inTransaction?: () => void | Promise<void>,
): PointerStore {
  if (config.kind === 'sqlite') {
    if (inTransaction === undefined) return new SqlitePointerStore({ path: config.path });
    const db = new Database(config.path, { timeout: 5000 });
    retryWhileBusy(5000, () => useDurableWal(db));
    const store = new SqlitePointerStore({ database: db });
    db.function('in_publish', () => {
      void inTransaction();
      return null;
    });
    db.exec(
      'CREATE TEMP TRIGGER in_publish AFTER INSERT ON leasehold_catalog_history BEGIN SELECT in_publish(); END',
    );
    return store;
  }
  if (inTransaction === undefined) {
    return new PostgresPointerStore({
      connectionString: config.url,
      schema: config.schema,
      maxConnections: 4,
    });
  }
  const inner = new pg.Pool({ connectionString: config.url, max: 4 });
  inner.on('error', () => undefined);
  const pool: PgPool = {
    query: (text) => inner.query(text),
    end: () => inner.end(),
    connect: async (): Promise<PgPoolClient> => {
      const c = await inner.connect();
      // Only the COMMIT of a publish transaction (not, say, a migration's on first use).
      let inPublish = false;
      return {
        query: async (text: string, values?: readonly unknown[]) => {
          if (text.includes('_publish"(')) inPublish = true;
          if (text === 'COMMIT' && inPublish) {
            inPublish = false;
            await inTransaction();
          }
          return values === undefined ? c.query(text) : c.query(text, values as unknown[]);
        },
        release: (d?: boolean | Error) => c.release(d),
        on: (e: 'error', l: (err: Error) => void) => c.on(e, l),
        removeListener: (e: 'error', l: (err: Error) => void) => c.removeListener(e, l),
      };
    },
  };
  return new PostgresPointerStore({ pool, schema: config.schema });
}

/** The name's high-water mark as the catalog's fence tables hold it (0n: none yet). */
export async function markOf(config: PointerConfig, name: string): Promise<bigint> {
  if (config.kind === 'sqlite') {
    const fence = new SqliteFence({ path: config.path, table: 'leasehold_catalog_fence' });
    try {
      return fence.highWaterMark(name);
    } finally {
      fence.close();
    }
  }
  const fence = new PostgresFence({
    connectionString: config.url,
    schema: config.schema,
    table: 'leasehold_catalog_fence',
  });
  try {
    return await fence.highWaterMark(name);
  } finally {
    await fence.close();
  }
}
