import { invalidArgument, LeaseholdError } from '../core/errors.js';
import { parseDuration, type Duration } from '../core/duration.js';
import type { ClaimResult, FenceResult } from '../core/results.js';
import { parseInt8Text, parseToken, validateKey } from '../core/validate.js';
import { booleanOption, requireObject } from '../core/runtime/options.js';
import {
  answerWithin,
  boundedClient,
  checkIdentifier,
  checkout,
  renderSql,
  resolveConnection,
  resultAt,
  timeoutPrefix,
  type PgPool,
  type PgPoolClient,
  type PostgresConnectionOptions,
} from '../drivers/postgres/client.js';
import { unavailable } from '../drivers/postgres/errors.js';
import { runMigrations, type MigrationReport } from '../drivers/postgres/migrate.js';
import type { FenceDecisionHook } from '../core/fence-decision.js';
import { checkDecisionHook, claimDecision, tellDecision } from './decision.js';
import { claimParams, writeParams, type DecisionParams } from './decision-params.js';
import { fenceStatements, type FenceStatements } from './postgres-statements.js';
import { decisionOf } from './postgres-functions.js';

export type { FenceDecision, FenceDecisionHook } from '../core/fence-decision.js';

/** A connection inside the fenced transaction, handed to your write. Do not commit or roll back. */
export interface FenceTransaction {
  query<R = Record<string, unknown>>(
    text: string,
    values?: readonly unknown[],
  ): Promise<{ rows: R[]; rowCount: number | null }>;
}

/** Options for {@link PostgresFence}: a connection to the database of the protected data. */
export interface PostgresFenceOptions extends PostgresConnectionOptions {
  /** The schema of the fence tables (created if missing). Defaults to `public`. */
  readonly schema?: string;
  /** The high-water table; idempotency keys go to `<table>_op`. Defaults to `leasehold_fence`. */
  readonly table?: string;
  /**
   * `'>='` accepts any number of writes per generation (the seed's `last_fencing_token <=
   * incoming`); `'>'` accepts one write per grant and refuses an equal token. Defaults to `'>='`.
   */
  readonly policy?: '>=' | '>';
  /**
   * Where the lease table lives when writes ask for lease validation (it must be in the same
   * database). Defaults to `public.coordination_lease`.
   */
  readonly leaseTable?: { readonly schema?: string; readonly table?: string };
  /** Apply the fence's migrations before the first write. Defaults to `true`. */
  readonly autoMigrate?: boolean;
  /**
   * Bound for each statement and lock wait of the fenced transaction, and for idle gaps
   * inside it (a writer that stalls mid-transaction is disconnected and rolled back rather
   * than holding the scope's lock). The fence also stops waiting for any answer 1 s after
   * it, dropping the connection, so a stalled pooler or network throws `ERR_UNAVAILABLE`
   * instead of hanging. Defaults to `5s`.
   */
  readonly timeout?: Duration;
  /**
   * Told every decision once it is final (committed or rolled back), e.g. to report stale
   * rejections to the lease server (`createFenceReporter` in `leasehold/http`). Not told when
   * the write throws. Defaults to none.
   */
  readonly onDecision?: FenceDecisionHook;
}

/** One fenced write. */
export interface FencedWriteRequest {
  /** What the mark protects, e.g. the resource key (`report/july`). Same rules as a lease key. */
  readonly scope: string;
  /** The writer's fencing token: a `bigint` or a decimal string, never a JS number. */
  readonly token: bigint | string;
  /**
   * Makes retries of one operation within one generation safe: a second write with the same
   * (scope, token, key) answers `duplicate` and runs nothing.
   */
  readonly idempotencyKey?: string;
  /**
   * Also require, in the same transaction, that this lease still holds its key with this
   * token and is unexpired by the database clock — and lock its row until commit so no new
   * owner can be granted meanwhile (the seed's validate-and-write). Only when the lease
   * table is in this database. A lease that is gone answers `stale_fence`.
   */
  readonly lease?: { readonly key: string; readonly leaseId: string };
}

/**
 * The Postgres fence: a durable high-water mark per fencing scope, checked and advanced in
 * the same short transaction as your write (DESIGN §4).
 *
 * - `applied`: the token was not below the mark (or, with policy `'>'`, above it); the mark
 *   now equals the token and your write committed with it — atomically: a crash at any
 *   point leaves both or neither.
 * - `duplicate`: this (scope, token, idempotency key) was applied before; nothing ran.
 * - `stale_fence`: a newer token has reached the scope (or the validated lease is gone).
 *   Definitive: never retry under the same lease.
 * - Anything else (connection loss, timeouts, a failing COMMIT) throws: `ERR_UNAVAILABLE`
 *   for the database, your own error unchanged when your write throws (rolled back). When
 *   the connection is lost during COMMIT the outcome is unknown; retry with the same
 *   idempotency key to find out (`duplicate` if it had committed).
 *
 * Concurrent writers of one scope are serialised on the scope's row for the length of the
 * transaction, so keep the write short: no network calls inside it.
 *
 * {@link PostgresFence.claim} installs a generation with no write (claim before start).
 *
 * @example
 * const fence = new PostgresFence({ pool });
 * const r = await fence.write({ scope: 'report/july', token: lease.token }, (tx) =>
 *   tx.query('UPDATE report SET body = $1 WHERE id = $2', [body, 'july']),
 * );
 * if (r.status === 'stale_fence') stopWorking();
 */
export class PostgresFence {
  /** The acceptance policy. */
  readonly policy: '>=' | '>';
  private readonly pool: PgPool;
  private readonly ownPool: boolean;
  private readonly schema: string;
  private readonly autoMigrate: boolean;
  private readonly timeoutMs: number;
  private readonly onDecision: FenceDecisionHook | undefined;
  private readonly sql: FenceStatements;
  private ready: Promise<void> | undefined;
  private closed = false;

  constructor(options: PostgresFenceOptions) {
    requireObject(options);
    this.schema = checkIdentifier('schema', options.schema ?? 'public');
    const table = checkIdentifier('table', options.table ?? 'leasehold_fence');
    const policy = options.policy ?? '>=';
    if (policy !== '>=' && policy !== '>') {
      throw invalidArgument('policy', "must be '>=' or '>'", policy);
    }
    this.policy = policy;
    this.autoMigrate = booleanOption('autoMigrate', options.autoMigrate, true);
    this.onDecision = checkDecisionHook(options.onDecision);
    this.timeoutMs =
      options.timeout === undefined ? 5000 : parseDuration('timeout', options.timeout);
    if (this.timeoutMs < 1 || this.timeoutMs > 600_000) {
      throw invalidArgument('timeout', 'must be between 1ms and 10m', options.timeout);
    }
    const lt = options.leaseTable;
    const leaseSchema = checkIdentifier('leaseTable.schema', lt?.schema ?? 'public');
    const leaseTable = checkIdentifier('leaseTable.table', lt?.table ?? 'coordination_lease');
    const conn = resolveConnection(options);
    this.pool = conn.pool;
    this.ownPool = conn.ownPool;

    this.sql = fenceStatements({ schema: this.schema, table, leaseSchema, leaseTable, policy });
  }

  /** Creates or upgrades the fence tables (advisory-locked; safe from several processes). */
  migrate(): Promise<MigrationReport> {
    this.assertOpen();
    return runMigrations(this.pool, this.schema, this.sql.migrations);
  }

  /**
   * Runs `write` inside the fenced transaction if `request.token` may still write to
   * `request.scope`; see the class description for the outcomes. `write` receives the
   * transaction's connection; its return value comes back in `applied`.
   */
  async write<T>(
    request: FencedWriteRequest,
    write: (tx: FenceTransaction) => Promise<T> | T,
  ): Promise<FenceResult<T>> {
    const result = await this.decide(request, write);
    this.tell(request, result);
    return result;
  }

  private tell(request: FencedWriteRequest, result: FenceResult<unknown>): void {
    if (this.onDecision === undefined) return;
    tellDecision(this.onDecision, {
      scope: request.scope,
      token: parseToken(request.token, 'token'),
      status: result.status,
      ...(result.status === 'stale_fence' ? { highWaterMark: result.highWaterMark } : {}),
    });
  }

  /** Validates a request; its parameters for the decision. */
  private checkRequest(request: FencedWriteRequest): DecisionParams {
    this.assertOpen();
    return writeParams(request, this.policy, this.sql.leaseTable);
  }

  private async decide<T>(
    request: FencedWriteRequest,
    write: (tx: FenceTransaction) => Promise<T> | T,
  ): Promise<FenceResult<T>> {
    const { params } = this.checkRequest(request);
    if (typeof write !== 'function') throw invalidArgument('write', 'must be a function', write);
    await this.ensureReady();

    // Each statement is bounded on the server (statement_timeout) and, for a stalled pooler
    // or network that never delivers it, here as well, a little later.
    const bound = this.timeoutMs + CLIENT_GRACE_MS;
    const { client: raw, done: release } = await checkout(this.pool, 'PostgreSQL fence', bound);
    const client = boundedClient(raw, bound, 'PostgreSQL fence');
    let inTransaction = false;
    let broken: Error | undefined;
    try {
      const ms = this.timeoutMs;
      inTransaction = true;
      // The decision is the database function every other caller uses too (decision 034);
      // it answers a refusal with its reason, so a refusal costs no extra read.
      const decided = decisionOf(
        resultAt(
          await client.query(
            `BEGIN; ${timeoutPrefix(ms)}` +
              `SET LOCAL idle_in_transaction_session_timeout = ${ms}; ` +
              renderSql(this.sql.decideWrite, params),
          ),
          -1,
        ).rows[0],
      );
      if (decided.status !== 'applied') {
        await client.query('ROLLBACK');
        inTransaction = false;
        return decided;
      }

      let value: T;
      try {
        value = await write(transactionOf(client));
      } catch (err) {
        // The caller's own failure: roll back and hand it back unchanged.
        await client.query('ROLLBACK').catch((e: unknown) => {
          broken = e instanceof Error ? e : new Error(String(e));
        });
        inTransaction = false;
        throw new CallerError(err);
      }
      await client.query('COMMIT');
      inTransaction = false;
      return { status: 'applied', value };
    } catch (err) {
      if (err instanceof CallerError) throw err.inner;
      broken = err instanceof Error ? err : new Error(String(err));
      throw unavailable('PostgreSQL fence', err);
    } finally {
      if (inTransaction && broken === undefined) {
        await client.query('ROLLBACK').catch((e: unknown) => {
          broken = e instanceof Error ? e : new Error(String(e));
        });
      }
      // A connection that failed mid-transaction is destroyed, never reused.
      release(broken);
    }
  }

  /**
   * Claim before start (DESIGN §4): installs `token`'s generation on `scope` with no domain
   * write, committed (the same statement and durability as a write's check, without lease
   * validation), so that no write with a lower token is accepted here from now on — even
   * before this token's first write. One round trip when applied, two when stale.
   *
   * The rule, the same in every fence: a claim at T answers `applied` exactly when a write at
   * T would pass now, and then leaves the mark at T (moved, or already there) without using
   * T's write:
   * - `>=`: applied when T ≥ mark. Tokens below T are refused; T writes as often as before.
   * - `>` (one write per grant): applied when T > mark, or T = mark installed by a claim not
   *   yet used by a write (so a repeated claim is idempotent). The mark then refuses every
   *   token below T, and T's one write still passes: the first write at T clears the claim,
   *   and the next write at T is refused as before. A claim at T after T has written answers
   *   `stale_fence` (T's write is spent).
   * - Otherwise `stale_fence` with the mark: a newer owner claimed or wrote; nothing changed.
   *
   * Throws `ERR_INVALID_ARGUMENT` for a malformed scope or token, `ERR_UNAVAILABLE` when the
   * database cannot answer (the claim may or may not have committed: claim again). Told to
   * `onDecision` with `op: 'claim'`.
   *
   * @example
   * const r = await fence.claim('report/july', lease.token);
   * if (r.status === 'stale_fence') await lease.release(); // superseded before starting
   */
  async claim(scope: string, token: bigint | string): Promise<ClaimResult> {
    this.assertOpen();
    const params = claimParams(scope, token, this.policy, this.sql.leaseTable);
    await this.ensureReady();
    try {
      // One implicit transaction: the decision commits with the message.
      const decided = decisionOf(
        resultAt(
          await answerWithin(
            this.pool.query(
              timeoutPrefix(this.timeoutMs) + renderSql(this.sql.decideClaim, params),
            ),
            this.timeoutMs + CLIENT_GRACE_MS,
            'PostgreSQL fence: claiming',
          ),
          -1,
        ).rows[0],
      );
      if (decided.status !== 'duplicate')
        tellDecision(
          this.onDecision,
          claimDecision(params[0] as string, BigInt(params[1] as string), decided),
        );
      if (decided.status === 'applied') return CLAIM_APPLIED;
      if (decided.status === 'stale_fence') return decided;
      throw new LeaseholdError(
        'ERR_PROTOCOL',
        'the fence function answered a claim with duplicate',
      );
    } catch (err) {
      if (err instanceof LeaseholdError && err.code === 'ERR_PROTOCOL') throw err;
      throw unavailable('PostgreSQL fence', err);
    }
  }

  /** The scope's current high-water mark (0n when nothing was accepted yet). */
  async highWaterMark(scope: string): Promise<bigint> {
    this.assertOpen();
    const s = validateKey(scope, 'scope');
    await this.ensureReady();
    try {
      const r = resultAt(
        await answerWithin(
          this.pool.query(timeoutPrefix(this.timeoutMs) + renderSql(this.sql.mark, [s])),
          this.timeoutMs + CLIENT_GRACE_MS,
          'PostgreSQL fence: reading the mark',
        ),
        -1,
      );
      const row = r.rows[0];
      return row === undefined ? 0n : parseInt8Text(row['hwm'], 'PostgreSQL');
    } catch (err) {
      throw unavailable('PostgreSQL fence', err);
    }
  }

  /** Ends the pool if the fence opened it. Later calls throw `ERR_CLOSED`. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownPool) await this.pool.end().catch(() => undefined);
  }

  private ensureReady(): Promise<void> {
    if (!this.autoMigrate) return Promise.resolve();
    this.ready ??= this.migrate().then(
      () => undefined,
      (err: unknown) => {
        this.ready = undefined;
        throw err;
      },
    );
    return this.ready;
  }

  private assertOpen(): void {
    if (this.closed) throw new LeaseholdError('ERR_CLOSED', 'the PostgreSQL fence was closed');
  }
}

const CLAIM_APPLIED: ClaimResult = Object.freeze({ status: 'applied' });

/** How much longer than its statement_timeout the fence waits for an answer itself. */
const CLIENT_GRACE_MS = 1000;

/** Carries an error thrown by the caller's write past our own error handling. */
class CallerError extends Error {
  constructor(readonly inner: unknown) {
    super('the fenced write threw');
  }
}

function transactionOf(client: PgPoolClient): FenceTransaction {
  return {
    query: async <R>(text: string, values?: readonly unknown[]) =>
      (await (values === undefined ? client.query(text) : client.query(text, values))) as {
        rows: R[];
        rowCount: number | null;
      },
  };
}
