import pg from 'pg';
import { invalidArgument } from '../../core/errors.js';
import type { ClaimResult } from '../../core/results.js';
import { checkIdentifier, quoteIdent } from '../../drivers/postgres/client.js';
import { unavailable } from '../../drivers/postgres/errors.js';
import { PostgresFence, type FenceTransaction } from '../postgres.js';
import {
  MAX_STORED_ANSWER_BYTES,
  VersionMismatch,
  decideFromMark,
  decodeAnswerHeaders,
  encodeAnswerHeaders,
  type AnswerRecord,
  type MarkDecision,
  type MarkPolicy,
  type MarkRequest,
  type MarkStore,
  type ScopeHold,
} from './mark-store.js';

/** Options for {@link PostgresMarkStore}. */
export interface PostgresMarkStoreOptions {
  /** `postgres://user@host:5432/db`. */
  readonly connectionString: string;
  /** Schema of the tables (created if missing). Defaults to `public`. */
  readonly schema?: string;
  /** The fence's mark table; `<table>_version` and `<table>_answer` are ours. Defaults to `leasehold_gateway`. */
  readonly table?: string;
  /** Connections for checks. Defaults to 10. */
  readonly maxConnections?: number;
  /** Connections for scope holds (one per scope forwarded at once). Defaults to 64. */
  readonly maxHolds?: number;
  /** Bound on each statement and on waiting for a scope another process holds. Defaults to 30 s. */
  readonly timeoutMs?: number;
}

/** Our tables, created after the fence's. Idempotent. */
const CREATE = `
CREATE TABLE IF NOT EXISTS {{v}} (
  scope   text COLLATE "C" PRIMARY KEY,
  version bigint NOT NULL CHECK (version >= 0)
);
CREATE TABLE IF NOT EXISTS {{a}} (
  scope        text COLLATE "C" NOT NULL,
  token        bigint NOT NULL,
  op_key       text COLLATE "C" NOT NULL,
  state        text NOT NULL,
  status       int,
  content_type text,
  body         bytea,
  headers      text,
  PRIMARY KEY (scope, token, op_key)
);
ALTER TABLE {{a}} ADD COLUMN IF NOT EXISTS headers text;`;

/** Inside the fenced transaction, after the fence locked the scope's mark row. Params: $1 scope. Returns version (text). */
const SELECT_VERSION = `SELECT version::text AS version FROM {{v}} WHERE scope = $1`;
/** Params: $1 scope, $2 version. */
const UPSERT_VERSION = `INSERT INTO {{v}} (scope, version) VALUES ($1, $2::bigint)
ON CONFLICT (scope) DO UPDATE SET version = EXCLUDED.version`;
/** Params: $1 scope, $2 token, $3 key, $4 state, $5 status, $6 content type, $7 body, $8 headers. */
const UPSERT_ANSWER = `INSERT INTO {{a}} (scope, token, op_key, state, status, content_type, body, headers)
VALUES ($1, $2::bigint, $3, $4, $5, $6, $7, $8)
ON CONFLICT (scope, token, op_key) DO UPDATE SET state = EXCLUDED.state, status = EXCLUDED.status,
  content_type = EXCLUDED.content_type, body = EXCLUDED.body, headers = EXCLUDED.headers`;
/** Params: $1 scope, $2 token. Forgets older generations' answers once the mark moved past them. */
const GC_ANSWERS = `DELETE FROM {{a}} WHERE scope = $1 AND token < $2::bigint`;
/** Params: $1 scope, $2 token, $3 key. */
const SELECT_ANSWER = `SELECT state, status, content_type, body, headers FROM {{a}}
WHERE scope = $1 AND token = $2::bigint AND op_key = $3`;
/**
 * A session-level advisory lock on the scope, keyed by a 64-bit hash of its name (a collision
 * only serialises two scopes more). Params: $1 scope.
 */
const LOCK_SCOPE = `SELECT pg_advisory_lock(hashtextextended($1, 16016))`;
/** Params: $1 scope. */
const UNLOCK_SCOPE = `SELECT pg_advisory_unlock(hashtextextended($1, 16016))`;

/**
 * Marks in PostgreSQL, on {@link PostgresFence}: the fence's check-and-advance, the version
 * and the `pending` idempotency record commit in one transaction before the caller forwards.
 * {@link PostgresMarkStore.holdScope} holds a scope across gateway processes for a forward's
 * length (decision 008).
 */
export class PostgresMarkStore implements MarkStore {
  readonly kind = 'postgres';
  private readonly pool: pg.Pool;
  private readonly holds: pg.Pool;
  private readonly fences: Record<MarkPolicy, PostgresFence>;
  private readonly sql: Record<'version' | 'setVersion' | 'setAnswer' | 'gc' | 'answer', string>;
  private readonly create: string;
  private readonly timeoutMs: number;
  private ready: Promise<void> | undefined;

  constructor(options: PostgresMarkStoreOptions) {
    const url = options.connectionString;
    if (typeof url !== 'string' || url === '')
      throw invalidArgument('connectionString', 'must be a postgres:// URL', url);
    const schema = checkIdentifier('schema', options.schema ?? 'public');
    const table = checkIdentifier('table', options.table ?? 'leasehold_gateway');
    this.timeoutMs = options.timeoutMs ?? 30_000;
    if (!Number.isInteger(this.timeoutMs) || this.timeoutMs < 1 || this.timeoutMs > 600_000)
      throw invalidArgument('timeoutMs', 'must be an integer from 1 to 600000', this.timeoutMs);
    this.pool = new pg.Pool({ connectionString: url, max: options.maxConnections ?? 10 });
    this.pool.on('error', () => undefined);
    // keepAlive: a hold's session that dies silently is noticed by TCP, not only at unlock.
    this.holds = new pg.Pool({
      connectionString: url,
      max: options.maxHolds ?? 64,
      keepAlive: true,
      // Named so an operator can tell hold sessions apart (pg_stat_activity).
      application_name: `leasehold-gateway-hold-${process.pid}`,
      options: `-c lock_timeout=${this.timeoutMs}`,
    });
    this.holds.on('error', () => undefined);
    const base = { pool: this.pool, schema, table, timeout: this.timeoutMs };
    this.fences = {
      '>=': new PostgresFence({ ...base, policy: '>=' }),
      '>': new PostgresFence({ ...base, policy: '>' }),
    };
    const q = quoteIdent(schema);
    const fill = (text: string): string =>
      text
        .replaceAll('{{v}}', `${q}.${quoteIdent(`${table}_version`)}`)
        .replaceAll('{{a}}', `${q}.${quoteIdent(`${table}_answer`)}`);
    this.create = fill(CREATE);
    this.sql = {
      version: fill(SELECT_VERSION),
      setVersion: fill(UPSERT_VERSION),
      setAnswer: fill(UPSERT_ANSWER),
      gc: fill(GC_ANSWERS),
      answer: fill(SELECT_ANSWER),
    };
  }

  /** Creates the fence's tables and ours. Safe from several processes. */
  migrate(): Promise<void> {
    this.ready ??= (async () => {
      await this.fences['>='].migrate();
      try {
        await this.pool.query(this.create);
      } catch (err) {
        // Two processes creating the same table at once: one loses with a unique violation.
        if ((err as { code?: unknown }).code !== '23505')
          throw unavailable('PostgreSQL marks', err);
      }
    })().catch((err: unknown) => {
      this.ready = undefined;
      throw err;
    });
    return this.ready;
  }

  async check(request: MarkRequest): Promise<MarkDecision> {
    await this.migrate();
    const { scope, token, idempotencyKey: key, expectedVersion } = request;
    const fence = this.fences[request.policy];
    const fast = decideFromMark(request, await fence.highWaterMark(scope), undefined);
    if (fast !== undefined) return fast;
    try {
      const r = await fence.write(
        { scope, token, ...(key === undefined ? {} : { idempotencyKey: key }) },
        async (tx: FenceTransaction) => {
          let version: bigint | undefined;
          if (expectedVersion !== undefined) {
            const row = (await tx.query<{ version: string }>(this.sql.version, [scope])).rows[0];
            const current = row === undefined ? 0n : BigInt(row.version);
            if (current !== expectedVersion) throw new VersionMismatch(current);
            version = current + 1n;
            await tx.query(this.sql.setVersion, [scope, version.toString()]);
          }
          await tx.query(this.sql.gc, [scope, token.toString()]);
          if (key !== undefined) {
            await tx.query(this.sql.setAnswer, [
              scope,
              token.toString(),
              key,
              'pending',
              null,
              null,
              null,
              null,
            ]);
          }
          return version;
        },
      );
      switch (r.status) {
        case 'applied':
          return { status: 'applied', wrote: true, version: r.value };
        case 'duplicate':
        case 'stale_fence':
          return r;
      }
    } catch (err) {
      if (err instanceof VersionMismatch)
        return { status: 'version_mismatch', version: err.version };
      throw err;
    }
  }

  async claim(scope: string, token: bigint, policy: MarkPolicy): Promise<ClaimResult> {
    await this.migrate();
    return this.fences[policy].claim(scope, token);
  }

  async read(scope: string): Promise<{ highWaterMark: bigint; version: bigint }> {
    await this.migrate();
    const highWaterMark = await this.fences['>='].highWaterMark(scope);
    const r = await this.query<{ version: string }>(this.sql.version, [scope]);
    const row = r.rows[0];
    return { highWaterMark, version: row === undefined ? 0n : BigInt(row.version) };
  }

  async answer(scope: string, token: bigint, key: string): Promise<AnswerRecord | undefined> {
    await this.migrate();
    const r = await this.query<{
      state: string;
      status: number | null;
      content_type: string | null;
      body: Buffer | null;
      headers: string | null;
    }>(this.sql.answer, [scope, token.toString(), key]);
    const row = r.rows[0];
    if (row === undefined) return undefined;
    if (row.state === 'answered') {
      return {
        state: 'answered',
        status: row.status ?? 200,
        headers: decodeAnswerHeaders(row.headers, row.content_type),
        body: row.body ?? undefined,
      };
    }
    return { state: row.state as 'pending' | 'not_sent' | 'unknown' };
  }

  async saveAnswer(scope: string, token: bigint, key: string, record: AnswerRecord): Promise<void> {
    await this.migrate();
    const answered = record.state === 'answered';
    const body =
      answered && record.body && record.body.length <= MAX_STORED_ANSWER_BYTES ? record.body : null;
    await this.query(this.sql.setAnswer, [
      scope,
      token.toString(),
      key,
      record.state,
      answered ? record.status : null,
      answered ? (record.headers['content-type'] ?? null) : null,
      body,
      answered ? encodeAnswerHeaders(record.headers) : null,
    ]);
  }

  /**
   * Takes a session-level advisory lock on `scope` on a connection of its own and keeps it
   * until `release()`. A process that dies releases it with its session; `lost` fires when
   * this process notices its session is gone while holding it.
   */
  async holdScope(scope: string): Promise<ScopeHold> {
    let client: pg.PoolClient;
    try {
      client = await this.holds.connect();
    } catch (err) {
      throw unavailable('PostgreSQL scope hold', err);
    }
    const lost = new AbortController();
    const onError = (err: Error): void => lost.abort(err);
    client.on('error', onError);
    try {
      await client.query(LOCK_SCOPE, [scope]);
    } catch (err) {
      client.removeListener('error', onError);
      client.release(true);
      throw unavailable('PostgreSQL scope hold', err);
    }
    let released = false;
    return {
      lost: lost.signal,
      release: async () => {
        if (released) return;
        released = true;
        let broken: unknown = lost.signal.aborted ? lost.signal.reason : undefined;
        if (broken === undefined) {
          try {
            await client.query(UNLOCK_SCOPE, [scope]);
          } catch (err) {
            broken = err;
          }
        }
        client.removeListener('error', onError);
        // A session whose unlock failed is destroyed, which releases the lock with it.
        client.release(broken === undefined ? false : true);
      },
    };
  }

  private async query<R extends pg.QueryResultRow>(
    text: string,
    values: unknown[],
  ): Promise<pg.QueryResult<R>> {
    try {
      return await this.pool.query<R>(text, values);
    } catch (err) {
      throw unavailable('PostgreSQL marks', err);
    }
  }

  async close(): Promise<void> {
    await Promise.all([this.fences['>='].close(), this.fences['>'].close()]);
    await Promise.allSettled([this.pool.end(), this.holds.end()]);
  }
}
