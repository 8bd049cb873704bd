import { invalidArgument, LeaseholdError } from '../../core/errors.js';
import type {
  HandOffLeaseStore,
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreHandOffResult,
  StoreLeaseRef,
  BatchRenewingLeaseStore,
  StoreReleaseResult,
  StoreRenewRequest,
  StoreRenewResult,
  StoreRequestOptions,
  Unwatch,
  WatchChange,
} from '../../core/store.js';
import type { LeaseState, StoreCapabilities } from '../../core/types.js';
import { acquireAnswer, acquireParams, holderOf, unpackGrant } from './answers.js';
import {
  channelName,
  compileSql,
  lastResult,
  parseBigint,
  quoteIdent,
  quoteLiteral,
  renderSql,
  resolveConnection,
  timeoutPrefix,
  timeoutSettingMs,
  type PgPool,
  type PgResult,
  type SqlParam,
} from '../../drivers/postgres/client.js';
import {
  acquireCoalescer,
  sortByKeyBytes,
  releaseCoalescer,
  type AcquireAsk,
  type OnChange,
} from './batches.js';
import type { Coalescer } from './coalesce.js';
import { unavailable } from '../../drivers/postgres/errors.js';
import { Listener } from './notify.js';
import {
  acquireFunctionName,
  grantFunctionName,
  grantNoticeFunctionName,
  interestTableName,
  leaseMigrations,
  releaseFunctionName,
} from './migrate.js';
import { runMigrations, type MigrationReport } from '../../drivers/postgres/migrate.js';
import { resolvePostgresLeaseStoreOptions, type PostgresLeaseStoreOptions } from './options.js';
import * as Q from './queries.js';

const CAPABILITIES: StoreCapabilities = Object.freeze({
  timeAuthority: 'store',
  tokenDurability: 'durable',
  watch: 'push',
  sharedAcrossProcesses: true,
  minTtlMs: 1,
  ttlGranularityMs: 1,
  tokenBlocks: true,
});

/**
 * How a request commits: a read; durably (renewals); durably and as this store's own change
 * (grants and hand-offs: decision 029); or a release (decision 014, and decision 029).
 */
type Commit = 'read' | 'durable' | 'grant' | 'release';
/** Bound on the statements that register waiters' interest (watch has no request timeout). */
const INTEREST_TIMEOUT_MS = 5000;

const LOST: StoreRenewResult = Object.freeze({ status: 'lost' });

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Calls of the grant function (each retries lost races 5 times itself) before giving up. */
const ACQUIRE_ATTEMPTS = 3;

/**
 * The PostgreSQL lease store: the seed's `coordination_lease` table (§4), shared by any
 * number of processes and machines.
 *
 * - One statement, one round trip per acquire, renew and release; expiry by the database's
 *   `clock_timestamp()`; rows kept after release so tokens never reset. Grants and releases
 *   asked while another of the same kind is out share the next statement (decision 017).
 * - A busy answer costs no write: no row lock, no transaction id, no WAL.
 * - Every statement runs under `statement_timeout` and `lock_timeout` equal to the request's
 *   timeout, so a statement never outlives the caller's interest in it.
 * - Tokens are `bigint` columns read as text and parsed to `bigint` (never a JS number), so a
 *   global pg type parser cannot corrupt them.
 * - Interoperates with the seed's own statements run by other programs on the same table:
 *   the lease id is the row's `owner_id`.
 * - Token blocks (decision 007): a grant can reserve the tokens after its own (column
 *   `fencing_token_block`, migration 0003); the next grant — also the seed's own upsert, which
 *   a trigger lifts above the block — comes after the whole block.
 * - Waiting is woken by LISTEN/NOTIFY on one dedicated session per store.
 * - Durability: `synchronous_commit = on` per write (see `synchronousCommit`). After restoring
 *   the database from a backup, run {@link advancePostgresFencingEpoch} before clients
 *   return, or tokens could repeat.
 *
 * Failures to reach the database throw `ERR_UNAVAILABLE` (the client reports `unavailable`).
 *
 * @example
 * const store = new PostgresLeaseStore({ connectionString: 'postgres://app@db/app' });
 * const client = new LeaseClient({ store });
 * const r = await client.acquire('report/july', { ttl: '30s' });
 */
export class PostgresLeaseStore implements HandOffLeaseStore, BatchRenewingLeaseStore {
  readonly kind = 'postgres';
  readonly capabilities = CAPABILITIES;
  /** The schema of the lease table. */
  readonly schema: string;
  /** The lease table. */
  readonly table: string;
  private readonly pool: PgPool;
  private readonly ownPool: boolean;
  private readonly listener: Listener;
  private readonly autoMigrate: boolean;
  /** The `synchronous_commit` prefix of each kind of request (decision 014 for releases). */
  private readonly commitPrefix: Readonly<Record<Commit, string>>;
  /**
   * The same commit modes as values for GRANT and RELEASE_ONE, which set them themselves
   * (migration 0005); null leaves the server's setting.
   */
  private readonly commitMode: { readonly durable: string | null; readonly release: string | null };
  /** GRANT and RELEASE_ONE, split at their parameters once. */
  private readonly lone: {
    readonly grant: (params: readonly SqlParam[]) => string;
    readonly release: (params: readonly SqlParam[]) => string;
  };
  /** The last `SET LOCAL statement_timeout` prefix and its ms (requests share a timeout). */
  private lastTimeout = { ms: -1, prefix: '' };
  /** Whether the migrations are known to be applied (or are not ours to apply). */
  private migrated: boolean;
  private readonly sql: {
    acquire: string;
    renew: string;
    renewMany: string;
    release: string;
    inspect: string;
    list: string;
    registerInterest: string;
    forgetExpired: string;
    forgetListener: string;
    acquireMany: string;
    releaseMany: string;
  };
  private readonly acquires: Coalescer<AcquireAsk, StoreAcquireResult | undefined>;
  private readonly releases: Coalescer<StoreLeaseRef, StoreReleaseResult>;
  /** Wakes this store's watchers after its own grants and releases (decision 022). */
  private readonly onChange: OnChange | undefined;
  /**
   * The listener id this store's grants, releases and hand-offs name so that their
   * notifications skip its own interest (decision 029): a lone call passes it to its function,
   * a batch or hand-off sets it in its message (`commitPrefix`). Only with the store's own
   * pool, whose statements all wake this store's watchers from their answers; null with the
   * caller's pool.
   */
  private readonly ownListener: string | null;
  private ready: Promise<void> | undefined;
  private closed = false;

  constructor(options: PostgresLeaseStoreOptions) {
    const resolved = resolvePostgresLeaseStoreOptions(options);
    this.schema = resolved.schema;
    this.table = resolved.table;
    this.autoMigrate = resolved.autoMigrate;
    const sync = resolved.synchronousCommit;
    const durable = sync === 'server_default' ? '' : `SET LOCAL synchronous_commit = ${sync}; `;
    // A release lost in a crash only delays takeover to its TTL; the next grant's durable
    // commit flushes it anyway (the WAL is one sequence).
    const release =
      sync === 'server_default' || resolved.durableReleases
        ? durable
        : 'SET LOCAL synchronous_commit = off; ';
    this.commitMode = {
      durable: sync === 'server_default' ? null : sync,
      release: sync === 'server_default' ? null : resolved.durableReleases ? sync : 'off',
    };
    this.migrated = !this.autoMigrate;
    const conn = resolveConnection(options, {
      ...(options.listenConnection !== undefined
        ? { listenConnection: options.listenConnection }
        : {}),
    });
    this.pool = conn.pool;
    this.ownPool = conn.ownPool;
    const channel = channelName(this.schema, this.table);
    this.listener = new Listener(
      conn.sessionConfig,
      channel,
      (id, keys, ttlMs, forget) => this.registerInterest(id, keys, ttlMs, forget),
      conn.backends,
    );
    // With its own pool the store wakes its watchers from its statements' answers, and the
    // listener drops the notifications of those statements (decision 022). With the
    // caller's pool, whose connections others may use too, notifications alone wake.
    const onChange: OnChange | undefined =
      conn.backends === undefined ? undefined : (key, change) => this.listener.changed(key, change);
    this.onChange = onChange;
    this.ownListener = onChange === undefined ? null : this.listener.id;
    // Batches and hand-offs run the plain statements, so they name the listener with one SET
    // for the whole message; the lone grant and release pass it to their function instead.
    const own =
      this.ownListener === null
        ? ''
        : `SET LOCAL leasehold.listener_id = ${quoteLiteral(this.ownListener)}; `;
    this.commitPrefix = { read: '', durable, grant: durable + own, release: release + own };
    const names: Record<string, string> = {
      lease: `${quoteIdent(this.schema)}.${quoteIdent(this.table)}`,
      acquire_fn: acquireFunctionName(this.schema, this.table),
      grant_notice_fn: grantNoticeFunctionName(this.schema, this.table),
      grant_fn: grantFunctionName(this.schema, this.table),
      release_fn: releaseFunctionName(this.schema, this.table),
      interest: interestTableName(this.schema, this.table),
      channel: quoteLiteral(channel),
    };
    const bind = (text: string): string =>
      text.replace(/\{\{(\w+)\}\}/g, (m, name: string) => names[name] ?? m);
    this.sql = {
      acquire: bind(Q.ACQUIRE),
      renew: bind(Q.RENEW),
      renewMany: bind(Q.RENEW_MANY),
      release: bind(Q.RELEASE),
      inspect: bind(Q.INSPECT),
      list: bind(Q.LIST_LIVE),
      registerInterest: bind(Q.REGISTER_INTEREST),
      forgetExpired: bind(Q.FORGET_EXPIRED_INTEREST),
      forgetListener: bind(Q.FORGET_LISTENER_INTEREST),
      acquireMany: bind(Q.ACQUIRE_MANY),
      releaseMany: bind(Q.RELEASE_MANY),
    };
    this.lone = { grant: compileSql(bind(Q.GRANT)), release: compileSql(bind(Q.RELEASE_ONE)) };
    this.acquires = acquireCoalescer(
      (statement, params, timeoutMs) => this.run(statement, params, timeoutMs, 'grant'),
      { many: this.sql.acquireMany },
      (params, timeoutMs) => this.grantOne(params, timeoutMs),
      onChange,
    );
    this.releases = releaseCoalescer(
      (statement, params, timeoutMs) => this.run(statement, params, timeoutMs, 'release'),
      { many: this.sql.releaseMany },
      (ref, timeoutMs) => this.releaseOne(ref, timeoutMs),
      onChange,
    );
  }

  /**
   * Applies pending migrations now (advisory-locked: safe from several processes at once).
   * Throws `ERR_UNAVAILABLE` when the database cannot be reached or refuses the DDL.
   */
  migrate(): Promise<MigrationReport> {
    this.assertOpen();
    return runMigrations(this.pool, this.schema, leaseMigrations(this.schema, this.table));
  }

  async tryAcquire(
    request: StoreAcquireRequest,
    options: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    if (!UUID.test(request.leaseId)) {
      throw invalidArgument('leaseId', 'must be a UUID', request.leaseId);
    }
    const ask: AcquireAsk = { request, params: acquireParams(request) };
    for (let attempt = 0; attempt < ACQUIRE_ATTEMPTS; attempt++) {
      this.assertOpen();
      const answer = await this.acquires.submit(ask, options.timeoutMs);
      // Undefined: the grant function lost a race five times in a row (each time the winner
      // had already released again). Rare; re-ask, bounded.
      if (answer !== undefined) return answer;
    }
    throw new LeaseholdError(
      'ERR_UNAVAILABLE',
      `contention on ${JSON.stringify(request.key)} did not settle in ${ACQUIRE_ATTEMPTS} attempts`,
    );
  }

  /**
   * {@link HandOffLeaseStore}: the seed's conditional release and the grant function in one
   * simple-protocol message — one implicit transaction, one round trip. The grant sees the
   * release (same transaction), and nobody can slip in between: the released row stays
   * locked until the grant commits. The release's NOTIFY still goes out on commit; waiters
   * it wakes find the key held by the new lease.
   */
  async releaseAndAcquire(
    release: StoreLeaseRef,
    acquire: StoreAcquireRequest,
    options: StoreRequestOptions,
  ): Promise<StoreHandOffResult> {
    if (!UUID.test(acquire.leaseId)) {
      throw invalidArgument('leaseId', 'must be a UUID', acquire.leaseId);
    }
    if (!UUID.test(release.leaseId)) {
      return { released: 'not_owner', acquired: await this.tryAcquire(acquire, options) };
    }
    const results = await this.runAll(
      renderSql(this.sql.release, [release.key, release.leaseId, release.token]) +
        '; ' +
        renderSql(this.sql.acquire, acquireParams(acquire)),
      options.timeoutMs,
      'grant',
    );
    const releasedRows = results[results.length - 2]?.rows.length;
    if (releasedRows === undefined) {
      throw new LeaseholdError('ERR_PROTOCOL', 'PostgreSQL returned no result for the release');
    }
    const released = releasedRows === 1 ? 'released' : 'not_owner';
    const grantRow = results[results.length - 1]?.rows[0];
    const answer = acquireAnswer(grantRow);
    if (this.onChange !== undefined) {
      const granted = grantRow?.['status'] === 'acquired' || grantRow?.['status'] === 'held';
      // Released and granted again in one transaction: the key never looked free, so only
      // the grant is news (waiters woken by the release would find it held).
      if (granted) this.onChange(acquire.key, 'granted');
      else if (released === 'released') this.onChange(release.key);
    }
    return {
      released,
      // After lost races (rare), the released key is asked for again on its own.
      acquired: answer ?? (await this.tryAcquire(acquire, options)),
    };
  }

  async renew(
    lease: StoreLeaseRef & { readonly ttlMs: number },
    options: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    if (!UUID.test(lease.leaseId)) return { status: 'lost' };
    const result = await this.run(
      this.sql.renew,
      [lease.key, lease.leaseId, lease.token, lease.ttlMs],
      options.timeoutMs,
      'durable',
    );
    const row = result.rows[0];
    if (row === undefined) return { status: 'lost' };
    const expiresAtWallMs = Number(row['expires_ms']);
    return Number.isFinite(expiresAtWallMs)
      ? { status: 'renewed', expiresAtWallMs }
      : { status: 'renewed' };
  }

  /**
   * {@link BatchRenewingLeaseStore}: every lease in one statement (RENEW_MANY), one round trip
   * and one durable commit for the whole call; each lease answered on its own.
   */
  async renewMany(
    leases: readonly StoreRenewRequest[],
    options: StoreRequestOptions,
  ): Promise<readonly StoreRenewResult[]> {
    const results = new Array<StoreRenewResult>(leases.length).fill(LOST);
    // A lease id that is not a UUID was never granted here (renew answers lost too). Keys in
    // the byte order the coalesced grants and releases lock rows in (decision 017).
    const sent: number[] = [];
    for (let i = 0; i < leases.length; i++) if (UUID.test(leases[i]!.leaseId)) sent.push(i);
    if (sent.length === 0) return results;
    sortByKeyBytes(sent, (i) => leases[i]!.key);
    const keys = new Array<string>(sent.length);
    const ids = new Array<string>(sent.length);
    const tokens = new Array<string>(sent.length);
    const ttls = new Array<string>(sent.length);
    for (let k = 0; k < sent.length; k++) {
      const lease = leases[sent[k]!]!;
      keys[k] = lease.key;
      ids[k] = lease.leaseId;
      tokens[k] = lease.token.toString();
      ttls[k] = String(lease.ttlMs);
    }
    const [updated, clock] = (
      await this.runAll(
        renderSql(this.sql.renewMany, [keys, ids, tokens, ttls]),
        options.timeoutMs,
        'durable',
      )
    ).slice(-2);
    const atMs = Number(clock?.rows[0]?.['at_ms']);
    for (const row of updated?.rows ?? []) {
      const at = sent[Number(row['i']) - 1];
      if (at === undefined)
        throw new LeaseholdError('ERR_PROTOCOL', 'PostgreSQL renewed a lease it was not asked to');
      const expiresAtWallMs = atMs + leases[at]!.ttlMs;
      results[at] = Number.isFinite(expiresAtWallMs)
        ? { status: 'renewed', expiresAtWallMs }
        : { status: 'renewed' };
    }
    return results;
  }

  async release(lease: StoreLeaseRef, options: StoreRequestOptions): Promise<StoreReleaseResult> {
    if (!UUID.test(lease.leaseId)) return { status: 'not_owner' };
    this.assertOpen();
    return this.releases.submit(
      { key: lease.key, leaseId: lease.leaseId, token: lease.token },
      options.timeoutMs,
    );
  }

  async inspect(key: string, options: StoreRequestOptions): Promise<LeaseState> {
    const result = await this.run(this.sql.inspect, [key], options.timeoutMs, 'read');
    const row = result.rows[0];
    if (row === undefined) return { key, lastToken: 0n, holder: undefined };
    const token = parseBigint(row['token']);
    return {
      key,
      lastToken: parseBigint(row['last_token']),
      holder: row['live'] === true ? holderOf(row, token) : undefined,
    };
  }

  async list(prefix: string, limit: number, options: StoreRequestOptions): Promise<LeaseState[]> {
    const result = await this.run(this.sql.list, [prefix, limit], options.timeoutMs, 'read');
    return result.rows.map((row) => {
      const token = parseBigint(row['token']);
      return {
        key: String(row['key']),
        lastToken: parseBigint(row['last_token']),
        holder: holderOf(row, token),
      };
    });
  }

  async watch(key: string, onChange: (change?: WatchChange) => void): Promise<Unwatch> {
    this.assertOpen();
    await this.ensureReady();
    return this.listener.subscribe(key, onChange);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const registered = this.listener.hasRegistered;
    await this.listener.close();
    if (registered) {
      // Best effort: releases stop notifying for this store now rather than at expiry.
      const text =
        timeoutPrefix(INTEREST_TIMEOUT_MS) + renderSql(this.sql.forgetListener, [this.listener.id]);
      await this.pool.query(text).catch(() => undefined);
    }
    if (this.ownPool) await this.pool.end().catch(() => undefined);
  }

  /** The listener's interest rows (REGISTER_INTEREST), committed before it answers. */
  private async registerInterest(
    listenerId: string,
    keys: readonly string[],
    ttlMs: number,
    forget: boolean,
  ): Promise<void> {
    const text =
      timeoutPrefix(INTEREST_TIMEOUT_MS) +
      renderSql(this.sql.registerInterest, [keys, listenerId, ttlMs]) +
      (forget ? `; ${this.sql.forgetExpired}` : '');
    await this.pool.query(text);
  }

  /**
   * A grant on its own: `SET LOCAL statement_timeout` and GRANT, which sets the lock timeout
   * and the commit mode itself (migration 0005). Rows in ACQUIRE's shape.
   */
  private async grantOne(
    params: readonly SqlParam[],
    timeoutMs: number,
  ): Promise<Array<Record<string, unknown>>> {
    const ms = timeoutSettingMs(timeoutMs);
    const text = this.lone.grant([...params, ms, this.commitMode.durable, this.ownListener]);
    const rows = lastResult(await this.query(this.statementTimeout(ms) + text)).rows;
    return rows.map(unpackGrant);
  }

  /** A release on its own, as {@link grantOne}: whether it released. */
  private async releaseOne(ref: StoreLeaseRef, timeoutMs: number): Promise<boolean> {
    const ms = timeoutSettingMs(timeoutMs);
    const text = this.lone.release([
      ref.key,
      ref.leaseId,
      ref.token,
      ms,
      this.commitMode.release,
      this.ownListener,
    ]);
    return lastResult(await this.query(this.statementTimeout(ms) + text)).rows.length === 1;
  }

  /** `SET LOCAL statement_timeout = ms; `, kept for the last ms (every request shares one). */
  private statementTimeout(ms: number): string {
    if (this.lastTimeout.ms !== ms) {
      this.lastTimeout = { ms, prefix: `SET LOCAL statement_timeout = ${ms}; ` };
    }
    return this.lastTimeout.prefix;
  }

  /** Sends one statement with its timeouts as a single simple-protocol message. */
  private async run(
    statement: string,
    params: readonly SqlParam[],
    timeoutMs: number,
    commit: Commit,
  ): Promise<PgResult> {
    return lastResult(await this.send(renderSql(statement, params), timeoutMs, commit));
  }

  /** Sends rendered statements as one message (one implicit transaction); every result. */
  private async runAll(statements: string, timeoutMs: number, commit: Commit): Promise<PgResult[]> {
    const answer = await this.send(statements, timeoutMs, commit);
    return (Array.isArray(answer) ? answer : [answer]) as PgResult[];
  }

  private send(rendered: string, timeoutMs: number, commit: Commit): Promise<unknown> {
    return this.query(timeoutPrefix(timeoutMs) + this.commitPrefix[commit] + rendered);
  }

  /** Sends one message once the migrations are applied. */
  private async query(text: string): Promise<unknown> {
    this.assertOpen();
    // No `options.signal.aborted` check here: the client never sends an aborted request, and
    // reading `signal` makes the client create an AbortController for every request.
    // Once migrated, no await before the query (one turn of the microtask queue less).
    if (!this.migrated) await this.ensureReady();
    try {
      return await this.pool.query(text);
    } catch (err) {
      throw unavailable('PostgreSQL lease store', err);
    }
  }

  private ensureReady(): Promise<void> {
    if (!this.autoMigrate) return Promise.resolve();
    this.ready ??= this.migrate().then(
      () => {
        this.migrated = true;
      },
      (err: unknown) => {
        // Let the next request try again rather than remembering a transient failure.
        this.ready = undefined;
        throw err;
      },
    );
    return this.ready;
  }

  private assertOpen(): void {
    if (this.closed) {
      throw new LeaseholdError('ERR_CLOSED', 'the PostgreSQL lease store was closed');
    }
  }
}
