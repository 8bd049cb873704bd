import { LeaseholdError, invalidArgument } from '../../../../core/errors.js';
import { parseDuration, type Duration } from '../../../../core/duration.js';
import { booleanOption } from '../../../../core/runtime/options.js';
import { parseInt8Text } from '../../../../core/validate.js';
import {
  checkIdentifier,
  compileSql,
  lastResult,
  quoteLiteral,
  renderSql,
  resolveConnection,
  timeoutPrefix,
  type PgPool,
  type PostgresConnectionOptions,
  type SqlParam,
} from '../../../../drivers/postgres/client.js';
import { sqlState, unavailable } from '../../../../drivers/postgres/errors.js';
import { runMigrations, type Migration } from '../../../../drivers/postgres/migrate.js';
import { PostgresFence } from '../../../postgres.js';
import { REFUSED_STATE } from '../../../postgres-statements.js';
import type { PointerStore, PublishRequest, Tombstone } from '../../pointer-store.js';
import type { ClaimResult } from '../../../../core/results.js';
import type { CatalogEntry, PublishResult } from '../../results.js';
import { catalogFiller, postgresCatalogMigrations } from './migrate.js';
import * as Q from './queries.js';

/** Options for {@link PostgresPointerStore}: a connection, and where the tables go. */
export interface PostgresPointerStoreOptions extends PostgresConnectionOptions {
  /**
   * The schema of the catalog's tables (created if missing, unless `autoMigrate` is false).
   * Defaults to `public`.
   */
  readonly schema?: string;
  /**
   * Prefix of the tables: `<prefix>_pointer` (which holds each published name's mark),
   * `_history`, `_object`, `_gc_mark` (how far the collector has read the history),
   * `_publish_v3`, `_publish_v4`, `_tombstone` and `_tombstone_guard` (functions) and
   * `_fence` / `_fence_op` (a
   * {@link PostgresFence}'s tables: marks of names not yet published, idempotency keys).
   * Defaults to `leasehold_catalog`.
   */
  readonly tablePrefix?: string;
  /** `'>='`: several publishes per lease; `'>'`: one per grant. Defaults to `'>='`. */
  readonly policy?: '>=' | '>';
  /**
   * Bound of each lock wait, and of each statement but the publish (a fixed number of
   * key lookups and writes, whose only waits are lock waits). Defaults to `5s`.
   */
  readonly timeout?: Duration;
  /**
   * Create the catalog (schema, tables, functions) or bring it to this version before the
   * first call. With `false` the store creates and changes nothing: a catalog that is not
   * there makes every call throw `ERR_UNAVAILABLE` ("no catalog here: …"), and only reads
   * (`pointer`, `history`, `list`) work on a catalog of an older version. What commands that
   * only read use. Defaults to `true`.
   */
  readonly autoMigrate?: boolean;
}

/** The SQLSTATE of the fence's refusals (`stale_fence`, `duplicate`), as PostgresFence raises them. */
const FENCE_REFUSED = REFUSED_STATE;
/** The SQLSTATE of the publish's own refusals (migrations 0002, 0003). */
const PUBLISH_REFUSED = 'LHC01';

/**
 * The result a refusal raised by the publish function stands for (migration 0003); any
 * other error is the database being unavailable.
 */
function refusalOf(err: unknown, req: PublishRequest): PublishResult {
  const state = sqlState(err);
  const e = err as { message?: unknown; detail?: unknown };
  if (state === FENCE_REFUSED) {
    if (e.message === 'duplicate') {
      const v = typeof e.detail === 'string' && e.detail !== '' ? Number(e.detail) : undefined;
      return { status: 'duplicate', version: v };
    }
    return { status: 'stale_fence', highWaterMark: parseInt8Text(e.detail, 'PostgreSQL') };
  }
  if (state !== PUBLISH_REFUSED) throw unavailable('PostgreSQL catalog', err);
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
 * name in `leasehold/catalog`, so SQLite users never load `pg`). A publish is one call of the
 * publish function (migration 0003): the name's mark lives in its pointer row, and mark,
 * pointer, history and registry commit in one implicit transaction. The
 * {@link PostgresFence} tables next to it keep the idempotency keys and serialise first
 * publishes of a name; the fence object only creates them.
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
  /** The publish statement, split at its `$n` once (it runs for every publish). */
  private readonly publishSql: ReturnType<typeof compileSql>;
  private readonly strict: string;
  private readonly autoMigrate: boolean;
  private readonly prefix: string;
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
    if (options.policy !== undefined && options.policy !== '>=' && options.policy !== '>')
      throw invalidArgument('policy', "must be '>=' or '>'", options.policy);
    this.strict = options.policy === '>' ? 'true' : 'false';
    this.autoMigrate = booleanOption('autoMigrate', options.autoMigrate, true);
    this.prefix = prefix;
    const fill = catalogFiller(this.schema, prefix);
    this.migrations = postgresCatalogMigrations(this.schema, prefix);
    this.sql = Object.fromEntries(
      Object.entries(Q).map(([k, v]) => [k, fill(v)]),
    ) as typeof this.sql;
    this.publishSql = compileSql(this.sql.PUBLISH);
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
   * One round trip, one statement: the publish function checks the mark in the pointer row
   * and moves the pointer in one implicit transaction; a refusal raises, so nothing commits.
   * The function bounds its own lock waits by the timeout (decision 025).
   */
  async publish(req: PublishRequest): Promise<PublishResult> {
    if (this.closed) throw new LeaseholdError('ERR_CLOSED', 'the catalog pointer store was closed');
    await this.ensureReady();
    const statement = this.publishSql([
      req.name,
      req.handle,
      req.token,
      req.leaseKey,
      req.leaseId,
      req.expectedVersion ?? null,
      req.idempotencyKey ?? null,
      this.strict,
      this.timeoutMs,
    ]);
    let published: unknown;
    try {
      published = lastResult(await this.pool.query(statement)).rows[0]?.['published'];
    } catch (err) {
      return refusalOf(err, req);
    }
    // "<version> <previous handle>": handles contain no space.
    const space = typeof published === 'string' ? published.indexOf(' ') : -1;
    const version = space > 0 ? Number((published as string).slice(0, space)) : NaN;
    if (!Number.isSafeInteger(version) || version < 1) {
      throw new LeaseholdError(
        'ERR_PROTOCOL',
        `the catalog publish answered ${JSON.stringify(published)}, not a version and a handle`,
      );
    }
    const previous = (published as string).slice(space + 1);
    return { status: 'applied', version, previousHandle: previous === '' ? undefined : previous };
  }

  /**
   * Claim before start, one round trip (queries.ts `CLAIM`): the mark in the pointer row, or
   * in the fence row of a name not yet published, rises to the token (to the token − 1 under
   * `'>'`, whose publishes must be above the mark: the claimed token's one publish still
   * passes). Under `'>'` a claim of a token that has published answers `stale_fence`.
   */
  async claim(name: string, token: bigint): Promise<ClaimResult> {
    await this.ensureReady();
    const mark = this.strict === 'true' ? token - 1n : token;
    let answer: unknown;
    try {
      answer = await this.pool.query(
        timeoutPrefix(this.timeoutMs) + renderSql(this.sql.CLAIM, [name, mark]),
      );
    } catch (err) {
      throw unavailable('PostgreSQL catalog', err);
    }
    const results = (Array.isArray(answer) ? answer : [answer]) as {
      rows: Record<string, unknown>[];
    }[];
    if (results.at(-2)?.rows[0]?.['claimed'] === 1) return CLAIM_APPLIED;
    return {
      status: 'stale_fence',
      highWaterMark: parseInt8Text(results.at(-1)?.rows[0]?.['mark'], 'PostgreSQL'),
    };
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
    // The fence's own migrations first: the catalog's version 3 reads and writes its tables.
    this.ready ??= (
      this.autoMigrate
        ? this.fence.migrate().then(() => runMigrations(this.pool, this.schema, this.migrations))
        : this.checkPresent()
    ).then(
      () => undefined,
      (err: unknown) => {
        this.ready = undefined;
        throw err;
      },
    );
    return this.ready;
  }
  /**
   * For a store that does not migrate: throws ERR_UNAVAILABLE, naming the schema and the
   * table it looked for, when the catalog is not there. A catalog has its pointer table from
   * its first version on.
   */
  private async checkPresent(): Promise<void> {
    let row: Record<string, unknown> | undefined;
    try {
      row = lastResult(
        await this.pool.query(timeoutPrefix(this.timeoutMs) + this.sql.CATALOG_PRESENT),
      ).rows[0];
    } catch (err) {
      throw unavailable('PostgreSQL catalog', err);
    }
    if (row?.['pointer_present'] === true) return;
    throw new LeaseholdError(
      'ERR_UNAVAILABLE',
      `no catalog here: schema ${JSON.stringify(this.schema)} ${
        row?.['schema_present'] === true ? `has no table ${this.prefix}_pointer` : 'does not exist'
      } (nothing was created; a catalog is created by the first stage or publish of a program that uses it)`,
    );
  }
}

const CLAIM_APPLIED: ClaimResult = Object.freeze({ status: 'applied' });

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
