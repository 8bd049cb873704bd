import { readFileSync } from 'node:fs';
import { LeaseholdError, invalidArgument } from '../../../../core/errors.js';
import { parseDuration, type Duration } from '../../../../core/duration.js';
import {
  checkIdentifier,
  lastResult,
  quoteIdent,
  quoteLiteral,
  renderSql,
  resolveConnection,
  sqlState,
  timeoutPrefix,
  unavailable,
  type PgPool,
  type PostgresConnectionOptions,
  type SqlParam,
} from '../../../../stores/postgres/client.js';
import { runMigrations, type Migration } from '../../../../stores/postgres/migrate.js';
import { PostgresFence } from '../../../postgres.js';
import type { PointerStore, PublishRequest, Tombstone } from '../../pointer-store.js';
import type { CatalogEntry, PublishResult } from '../../results.js';
import * as Q from './queries.js';

/** Options for {@link PostgresPointerStore}: a connection, and where the tables go. */
export interface PostgresPointerStoreOptions extends PostgresConnectionOptions {
  /** The schema of the catalog's tables (created if missing). Defaults to `public`. */
  readonly schema?: string;
  /**
   * Prefix of the tables: `<prefix>_pointer`, `_history`, `_object`, `_publish` (a function)
   * and `_fence` / `_fence_op` (the high-water marks, a {@link PostgresFence}). Defaults to `leasehold_catalog`.
   */
  readonly tablePrefix?: string;
  /** `'>='`: several publishes per lease; `'>'`: one per grant. Defaults to `'>='`. */
  readonly policy?: '>=' | '>';
  /** Bound of each statement and lock wait. Defaults to `5s`. */
  readonly timeout?: Duration;
}

/** The pointer store's migrations, in order. Released files are never edited: add a new one. */
export const POSTGRES_CATALOG_MIGRATIONS = [
  '0001_catalog.sql',
  '0002_publish_or_raise.sql',
] as const;

/** The SQLSTATE of the publish's own refusals (migration 0002). */
const PUBLISH_REFUSED: ReadonlySet<string> = new Set(['LHC01']);

/** The result a refusal raised by the publish function stands for; other errors rethrown. */
function refusalOf(err: unknown, req: PublishRequest): PublishResult {
  if (sqlState(err) !== 'LHC01') throw err;
  const e = err as { message?: unknown; detail?: unknown };
  let detail: { currentVersion?: string | null; currentKey?: string | null } = {};
  try {
    detail = JSON.parse(String(e.detail)) as typeof detail;
  } catch {
    // An unreadable detail leaves the fields unknown; the status still decides.
  }
  switch (e.message) {
    case 'not_staged':
      return { status: 'not_staged' };
    case 'version_conflict':
      return { status: 'version_conflict', currentVersion: Number(detail.currentVersion) };
    case 'wrong_key':
      throw invalidArgument(
        'lease.key',
        `must be the key every publish of ${req.name} uses (${JSON.stringify(detail.currentKey)}): tokens of different keys do not compare`,
        req.leaseKey,
      );
    default:
      throw new LeaseholdError(
        'ERR_PROTOCOL',
        `the catalog publish function answered ${JSON.stringify(e.message)}`,
      );
  }
}

/**
 * The catalog's pointer store in PostgreSQL (loaded on first use by the class of the same
 * name in `leasehold/catalog`, so SQLite users never load `pg`). The pointer move runs inside
 * a {@link PostgresFence} write: mark, pointer, history and registry commit in one transaction.
 */
export class PostgresPointers implements PointerStore {
  readonly description: string;
  private readonly pool: PgPool;
  private readonly ownPool: boolean;
  private readonly schema: string;
  private readonly fence: PostgresFence;
  private readonly timeoutMs: number;
  private readonly migrations: Migration[];
  private readonly sql: Record<keyof typeof Q, string>;
  private ready: Promise<void> | undefined;
  private closed = false;

  constructor(options: PostgresPointerStoreOptions) {
    if (typeof options !== 'object' || options === null)
      throw invalidArgument('options', 'must be an object', options);
    this.schema = checkIdentifier('schema', options.schema ?? 'public');
    const prefix = checkIdentifier('tablePrefix', options.tablePrefix ?? 'leasehold_catalog');
    if (Buffer.byteLength(prefix) > 40)
      throw invalidArgument('tablePrefix', 'must be at most 40 bytes', prefix);
    this.timeoutMs =
      options.timeout === undefined ? 5000 : parseDuration('timeout', options.timeout);
    if (this.timeoutMs < 1 || this.timeoutMs > 600_000)
      throw invalidArgument('timeout', 'must be between 1ms and 10m', options.timeout);
    const conn = resolveConnection(options);
    this.pool = conn.pool;
    this.ownPool = conn.ownPool;
    this.fence = new PostgresFence({
      pool: this.pool,
      schema: this.schema,
      table: `${prefix}_fence`,
      policy: options.policy ?? '>=',
      timeout: this.timeoutMs,
    });
    const q = quoteIdent(this.schema);
    const names: Record<string, string> = {
      pointer: `${q}.${quoteIdent(`${prefix}_pointer`)}`,
      history: `${q}.${quoteIdent(`${prefix}_history`)}`,
      object: `${q}.${quoteIdent(`${prefix}_object`)}`,
      publish_fn: `${q}.${quoteIdent(`${prefix}_publish`)}`,
      publish_or_raise_fn: `${q}.${quoteIdent(`${prefix}_publish_or_raise`)}`,
      object_gc_index: quoteIdent(`${prefix}_object_gc`),
    };
    const fill = (text: string): string =>
      text.replace(/\{\{(\w+)\}\}/g, (m, k: string) => names[k] ?? m);
    this.migrations = POSTGRES_CATALOG_MIGRATIONS.map((file) => ({
      name: `${prefix}/${file}`,
      sql: fill(readFileSync(new URL(`./migrations/${file}`, import.meta.url), 'utf8')),
    }));
    this.sql = Object.fromEntries(
      Object.entries(Q).map(([k, v]) => [k, fill(v)]),
    ) as typeof this.sql;
    this.description = `postgres:${this.schema}.${prefix}`;
  }

  async register(handle: string, name: string, token: bigint, leaseId: string): Promise<void> {
    await this.query(this.sql.REGISTER, [handle, name, token, leaseId]);
  }

  async complete(handle: string, size: number, checksum: string): Promise<void> {
    const r = await this.query(this.sql.COMPLETE, [handle, size, checksum]);
    if (r.rows.length !== 1) {
      throw collectedMidStage(handle);
    }
  }

  /**
   * One round trip: the mark's check and the pointer move in one message, one implicit
   * transaction (`PostgresFence.writeRendered`); a refusal of either rolls back both.
   */
  async publish(req: PublishRequest): Promise<PublishResult> {
    if (this.closed) throw new LeaseholdError('ERR_CLOSED', 'the catalog pointer store was closed');
    await this.ensureReady();
    const request = {
      scope: req.name,
      token: req.token,
      ...(req.idempotencyKey === undefined ? {} : { idempotencyKey: req.idempotencyKey }),
    };
    const statement = renderSql(this.sql.PUBLISH, [
      req.name,
      req.handle,
      req.token,
      req.leaseKey,
      req.leaseId,
      req.expectedVersion ?? null,
      req.idempotencyKey ?? null,
    ]);
    let r;
    try {
      r = await this.fence.writeRendered(request, statement, PUBLISH_REFUSED);
    } catch (err) {
      return refusalOf(err, req);
    }
    switch (r.status) {
      case 'applied': {
        const row = r.value.rows[0];
        if (row === undefined) {
          throw new LeaseholdError('ERR_PROTOCOL', 'the catalog publish answered no row');
        }
        return {
          status: 'applied',
          version: Number(row['version']),
          previousHandle:
            typeof row['previous_handle'] === 'string' ? row['previous_handle'] : undefined,
        };
      }
      case 'stale_fence':
        return r;
      case 'duplicate': {
        const d = await this.query(this.sql.SELECT_DUPLICATE, [
          req.name,
          req.token,
          req.idempotencyKey ?? null,
        ]);
        const v = d.rows[0]?.['version'];
        return { status: 'duplicate', version: v == null ? undefined : Number(v) };
      }
    }
  }

  async pointer(name: string): Promise<CatalogEntry | undefined> {
    const r = await this.query(this.sql.SELECT_POINTER, [name]);
    return r.rows[0] === undefined ? undefined : entryOf(r.rows[0]);
  }

  async history(name: string, limit: number): Promise<CatalogEntry[]> {
    return (await this.query(this.sql.SELECT_HISTORY, [name, limit])).rows.map(entryOf);
  }

  async list(prefix: string, limit: number): Promise<CatalogEntry[]> {
    return (await this.query(this.sql.SELECT_LIST, [prefix, limit])).rows.map(entryOf);
  }

  async tombstone(retentionMs: number, limit: number): Promise<Tombstone[]> {
    const r = await this.query(this.sql.TOMBSTONE, [retentionMs, limit]);
    return r.rows.map((row) => ({ handle: String(row['handle']), size: Number(row['size']) }));
  }

  async forget(handles: readonly string[]): Promise<void> {
    if (handles.length > 0) await this.query(withHandles(this.sql.FORGET, handles), []);
  }

  async registered(handles: readonly string[]): Promise<Set<string>> {
    if (handles.length === 0) return new Set();
    const r = await this.query(withHandles(this.sql.REGISTERED, handles), []);
    return new Set(r.rows.map((row) => String(row['handle'])));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.fence.close();
    if (this.ownPool) await this.pool.end().catch(() => undefined);
  }

  /**
   * One statement with its timeouts in one simple-protocol message (an implicit transaction,
   * so SET LOCAL bounds it): the stores' one-round-trip pattern.
   */
  private async query(
    sql: string,
    params: readonly SqlParam[],
  ): Promise<{ rows: Record<string, unknown>[] }> {
    if (this.closed) throw new LeaseholdError('ERR_CLOSED', 'the catalog pointer store was closed');
    await this.ensureReady();
    try {
      return lastResult(
        await this.pool.query(timeoutPrefix(this.timeoutMs) + renderSql(sql, params)),
      );
    } catch (err) {
      throw unavailable('PostgreSQL catalog', err);
    }
  }

  private ensureReady(): Promise<void> {
    this.ready ??= runMigrations(this.pool, this.schema, this.migrations).then(
      () => undefined,
      (err: unknown) => {
        this.ready = undefined;
        throw err;
      },
    );
    return this.ready;
  }
}

/**
 * A statement whose $1 is a text[] of handles, as a literal array: renderSql takes scalars
 * only, and handles contain no `$` (names are letters, digits, `.`, `_`, `-`).
 */
function withHandles(sql: string, handles: readonly string[]): string {
  return sql.replace('$1', `ARRAY[${handles.map(quoteLiteral).join(', ')}]::text[]`);
}

function entryOf(row: Record<string, unknown>): CatalogEntry {
  return {
    name: String(row['name']),
    handle: String(row['handle']),
    token: BigInt(String(row['token'])),
    leaseKey: String(row['lease_key']),
    leaseId: String(row['lease_id']),
    version: Number(row['version']),
    size: Number(row['size']),
    checksum: String(row['checksum']),
    publishedAtMs: Number(row['published_ms']),
  };
}

/**
 * The stage took longer than the collector's retention and its row was collected: transient
 * for the caller (stage again; choose a longer retention), not a broken invariant.
 */
function collectedMidStage(handle: string): LeaseholdError {
  return new LeaseholdError(
    'ERR_UNAVAILABLE',
    `staged object ${handle} was collected before its write finished (the stage took longer than the collector's retention): stage again`,
  );
}
