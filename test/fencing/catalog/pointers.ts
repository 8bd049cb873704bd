import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { PointerStore } from '../../../src/fencing/catalog/pointer-store.js';
import { PostgresPointerStore } from '../../../src/fencing/catalog/pointers/postgres/index.js';
import { SqlitePointerStore } from '../../../src/fencing/catalog/pointers/sqlite/store.js';
import { retryWhileBusy, useDurableWal } from '../../../src/drivers/sqlite/open-file.js';

/** Which pointer store a writer process or a test opens. */
export type PointerConfig =
  | { readonly kind: 'sqlite'; readonly path: string }
  | { readonly kind: 'postgres'; readonly url: string; readonly schema: string };

/**
 * Opens the pointer store. `inTransaction` (SQLite only) runs inside every publish
 * transaction, after the pointer moved and before COMMIT, through a TEMP trigger on this
 * connection. A PostgreSQL publish is one message the client cannot pause inside: hold it
 * on the server instead ({@link holdPublishes}).
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
  if (inTransaction !== undefined) {
    throw new Error('a PostgreSQL publish cannot be paused from the client: use holdPublishes');
  }
  return new PostgresPointerStore({
    connectionString: config.url,
    schema: config.schema,
    maxConnections: 4,
  });
}

/** A PostgreSQL publish held on the server mid-transaction; see {@link holdPublishes}. */
export interface PublishHold {
  /** Resolves once a publish waits on the hold: its object row locked, pointer moved, uncommitted. */
  blocked(): Promise<void>;
  /** Lets held publishes go on. */
  release(): Promise<void>;
}

/**
 * Holds every PostgreSQL publish of this schema inside its transaction: a lock on the
 * history table (whose insert comes after the object row is locked and the pointer moved)
 * that the publish waits on until {@link PublishHold.release}. The wait is read from
 * `pg_locks`, not guessed. Call after the schema was migrated.
 */
export async function holdPublishes(
  config: PointerConfig & { kind: 'postgres' },
): Promise<PublishHold> {
  const c = new pg.Client({ connectionString: config.url });
  await c.connect();
  const history = historyOf(config);
  await c.query(`BEGIN; LOCK TABLE ${history} IN EXCLUSIVE MODE`);
  const deadline = Date.now() + 60_000;
  return {
    blocked: async () => {
      for (;;) {
        const r = await c.query(
          `SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND relation = $1::regclass`,
          [history],
        );
        if ((r.rows[0] as { n: number }).n > 0) return;
        if (Date.now() > deadline) throw new Error('no publish waited on the hold within 60 s');
        await new Promise((res) => setTimeout(res, 10));
      }
    },
    release: async () => {
      await c.query('ROLLBACK');
      await c.end();
    },
  };
}

function historyOf(config: PointerConfig & { kind: 'postgres' }): string {
  return `"${config.schema}"."leasehold_catalog_history"`;
}

/** Resolves once no publish of any client is running on the server (committed or rolled back). */
export async function publishesDone(config: PointerConfig & { kind: 'postgres' }): Promise<void> {
  const c = new pg.Client({ connectionString: config.url });
  await c.connect();
  try {
    const deadline = Date.now() + 60_000;
    for (;;) {
      // A publish holds a lock on the history table until its transaction ends.
      const r = await c.query(
        `SELECT count(*)::int AS n FROM pg_locks
         WHERE relation = $1::regclass AND pid <> pg_backend_pid()`,
        [historyOf(config)],
      );
      if ((r.rows[0] as { n: number }).n === 0) return;
      if (Date.now() > deadline) throw new Error('a publish was still running after 60 s');
      await new Promise((res) => setTimeout(res, 10));
    }
  } finally {
    await c.end();
  }
}

/** The name's high-water mark as the catalog's fence tables hold it (0n: none yet). */
export async function markOf(config: PointerConfig, name: string): Promise<bigint> {
  if (config.kind === 'sqlite') {
    // The mark lives in the pointer row (SQLite migration 0002); before a name's first
    // publish, only a catalog from before it has one, in the fence table.
    const db = new Database(config.path, { readonly: true });
    try {
      const row = db
        .prepare(
          `SELECT COALESCE((SELECT high_water FROM leasehold_catalog_pointer WHERE name = @name),
                           (SELECT hwm FROM leasehold_catalog_fence WHERE scope = @name), 0) AS hwm`,
        )
        .safeIntegers(true)
        .get({ name }) as { hwm: bigint };
      return row.hwm;
    } finally {
      db.close();
    }
  }
  // The mark lives in the pointer row (migration 0003); before a name's first publish, in
  // the fence table that serialises first publishes.
  const client = new pg.Client({ connectionString: config.url });
  await client.connect();
  try {
    const t = `"${config.schema}".leasehold_catalog`;
    const r = await client.query<{ hwm: string }>(
      `SELECT COALESCE((SELECT high_water FROM ${t}_pointer WHERE name = $1),
                       (SELECT high_water FROM ${t}_fence WHERE scope = $1), 0)::text AS hwm`,
      [name],
    );
    return BigInt(r.rows[0]!.hwm);
  } finally {
    await client.end();
  }
}

/**
 * A complete staged registry row in a PostgreSQL catalog (`objectTable`, escaped), as
 * stage() leaves it, without the bytes: for tests of the pointer store alone. Returns its handle.
 */
export async function stagedPostgresRow(
  pool: pg.Pool,
  objectTable: string,
  name: string,
  token: bigint,
): Promise<string> {
  const handle = `${name}@${token}-${randomUUID().replaceAll('-', '').slice(0, 24)}`;
  await pool.query(
    `INSERT INTO ${objectTable} (handle, name, state, token, lease_id, size, checksum)
     VALUES ($1, $2, 'staged', $3, 'lease', 3, 'sum')`,
    [handle, name, token.toString()],
  );
  return handle;
}
