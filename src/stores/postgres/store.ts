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
  WatchOptions,
} from '../../core/store.js';
import type { LeaseState, StoreCapabilities } from '../../core/types.js';
import { acquireAnswer, acquireParams, holderOf, isLeaseId, unpackGrant } from './answers.js';
import {
  channelName,
  lastResult,
  parseBigint,
  renderSql,
  resolveConnection,
  timeoutPrefix,
  timeoutSettingMs,
  type PgPool,
  type SqlParam,
} from '../../drivers/postgres/client.js';
import { acquireCoalescer, releaseCoalescer, type AcquireAsk, type OnChange } from './batches.js';
import type { Coalescer } from './coalesce.js';
import { IncarnationWatch } from './incarnation.js';
import { Listener } from './notify.js';
import { leaseMigrations } from './migrate.js';
import { runMigrations, type MigrationReport } from '../../drivers/postgres/migrate.js';
import { resolvePostgresLeaseStoreOptions, type PostgresLeaseStoreOptions } from './options.js';
import { renewManyAnswers, renewManyAsk } from './renew-many.js';
import { StatementRunner } from './statement-runner.js';
import {
  commitModes,
  leaseStatements,
  type CommitModes,
  type LeaseStatements,
} from './statements.js';

const CAPABILITIES: StoreCapabilities = Object.freeze({
  timeAuthority: 'store',
  tokenDurability: 'durable',
  watch: 'push',
  sharedAcrossProcesses: true,
  minTtlMs: 1,
  ttlGranularityMs: 1,
  tokenBlocks: true,
});

const LOST: StoreRenewResult = Object.freeze({ status: 'lost' });

/** Bound on the statements that register waiters' interest (watch has no request timeout). */
const INTEREST_TIMEOUT_MS = 5000;

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
 * - Durability: `synchronous_commit = on` per write (see `synchronousCommit`).
 * - Failover and restore (decision 042): the first write on each connection compares the
 *   server's system identifier and timeline with the ones recorded next to the lease table;
 *   after a promotion or a restore it raises the token epoch in the same transaction, before
 *   it grants, and ends every lease held across the change (their renewals answer `lost` with
 *   reason `failover` or `restore`). A restore into a fresh server that brings no trace of the
 *   old one still needs {@link advancePostgresFencingEpoch} before clients return.
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
  /** How each kind of request commits (statements.ts). */
  private readonly commit: CommitModes;
  /** Sends the statements: after the migrations, never after close (statement-runner.ts). */
  private readonly runner: StatementRunner;
  private readonly sql: LeaseStatements;
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
  /** Changes of incarnation seen in the check answers (decision 042). */
  private readonly incarnation: IncarnationWatch;

  constructor(options: PostgresLeaseStoreOptions) {
    const resolved = resolvePostgresLeaseStoreOptions(options);
    this.schema = resolved.schema;
    this.table = resolved.table;
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
    this.commit = commitModes(
      resolved.synchronousCommit,
      resolved.durableReleases,
      this.ownListener,
    );
    this.sql = leaseStatements(this.schema, this.table, channel);
    this.incarnation = new IncarnationWatch(options.onIncarnationChange);
    this.runner = new StatementRunner(
      this.pool,
      this.commit,
      resolved.autoMigrate ? () => this.migrate() : undefined,
      resolved.detectIncarnation
        ? { check: this.sql.incarnationCheck, watch: this.incarnation }
        : undefined,
    );
    this.acquires = acquireCoalescer(
      (statement, params, timeoutMs) => this.runner.run(statement, params, timeoutMs, 'grant'),
      { many: this.sql.acquireMany },
      (params, timeoutMs) => this.grantOne(params, timeoutMs),
      onChange,
    );
    this.releases = releaseCoalescer(
      (statement, params, timeoutMs) => this.runner.run(statement, params, timeoutMs, 'release'),
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
    this.runner.assertOpen();
    return runMigrations(this.pool, this.schema, leaseMigrations(this.schema, this.table));
  }

  async tryAcquire(
    request: StoreAcquireRequest,
    options: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    if (!isLeaseId(request.leaseId)) {
      throw invalidArgument('leaseId', 'must be a UUID', request.leaseId);
    }
    const ask: AcquireAsk = { request, params: acquireParams(request) };
    for (let attempt = 0; attempt < ACQUIRE_ATTEMPTS; attempt++) {
      this.runner.assertOpen();
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
    if (!isLeaseId(acquire.leaseId)) {
      throw invalidArgument('leaseId', 'must be a UUID', acquire.leaseId);
    }
    if (!isLeaseId(release.leaseId)) {
      return { released: 'not_owner', acquired: await this.tryAcquire(acquire, options) };
    }
    const results = await this.runner.runAll(
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
    if (!isLeaseId(lease.leaseId)) return { status: 'lost' };
    const result = await this.runner.run(
      this.sql.renew,
      [lease.key, lease.leaseId, lease.token, lease.ttlMs],
      options.timeoutMs,
      'durable',
    );
    const row = result.rows[0];
    if (row === undefined) return this.lost(lease.token);
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
    const ask = renewManyAsk(leases);
    if (ask === undefined) return renewManyAnswers(leases, ask, undefined, undefined);
    const text = renderSql(this.sql.renewMany, ask.params);
    const [updated, clock] = (await this.runner.runAll(text, options.timeoutMs, 'durable')).slice(
      -2,
    );
    const answers = renewManyAnswers(leases, ask, updated, clock);
    return answers.map((a, i) => (a.status === 'lost' ? this.lost(leases[i]!.token) : a));
  }

  /** A `lost` answer, with the change of incarnation that ended the lease when one did. */
  private lost(token: bigint): StoreRenewResult {
    const reason = this.incarnation.lossReason(token);
    return reason === undefined ? LOST : { status: 'lost', reason };
  }

  async release(lease: StoreLeaseRef, options: StoreRequestOptions): Promise<StoreReleaseResult> {
    if (!isLeaseId(lease.leaseId)) return { status: 'not_owner' };
    this.runner.assertOpen();
    return this.releases.submit(
      { key: lease.key, leaseId: lease.leaseId, token: lease.token },
      options.timeoutMs,
    );
  }

  async inspect(key: string, options: StoreRequestOptions): Promise<LeaseState> {
    const result = await this.runner.run(this.sql.inspect, [key], options.timeoutMs, 'read');
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
    const result = await this.runner.run(this.sql.list, [prefix, limit], options.timeoutMs, 'read');
    return result.rows.map((row) => {
      const token = parseBigint(row['token']);
      return {
        key: String(row['key']),
        lastToken: parseBigint(row['last_token']),
        holder: holderOf(row, token),
      };
    });
  }

  async watch(
    key: string,
    onChange: (change?: WatchChange) => void,
    options?: WatchOptions,
  ): Promise<Unwatch> {
    this.runner.assertOpen();
    await this.runner.ensureReady();
    return this.listener.subscribe(key, onChange, options?.observer === true);
  }

  async close(): Promise<void> {
    if (!this.runner.close()) return;
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
    const text = this.sql.lone.grant([...params, ms, this.commit.durable, this.ownListener]);
    const rows = lastResult(await this.runner.write(this.runner.statementTimeout(ms) + text)).rows;
    return rows.map(unpackGrant);
  }

  /** A release on its own, as {@link grantOne}: whether it released. */
  private async releaseOne(ref: StoreLeaseRef, timeoutMs: number): Promise<boolean> {
    const ms = timeoutSettingMs(timeoutMs);
    const text = this.sql.lone.release([
      ref.key,
      ref.leaseId,
      ref.token,
      ms,
      this.commit.release,
      this.ownListener,
    ]);
    return (
      lastResult(await this.runner.query(this.runner.statementTimeout(ms) + text)).rows.length === 1
    );
  }
}
