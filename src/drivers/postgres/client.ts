import { createHash } from 'node:crypto';
import { invalidArgument, LeaseholdError } from '../../core/errors.js';
import { parseInt8Text } from '../../core/validate.js';
import { pg } from './driver.js';
import { answerWithin } from '../../core/runtime/answer-within.js';
import { unavailable } from './errors.js';

export { answerWithin };
export { checkIdentifier, quoteIdent } from './identifiers.js';

/**
 * The part of a `pg.Pool` leasehold uses: structural, so that the declarations do not
 * depend on `@types/pg` and any pool with this shape (pg's own, a wrapped one) fits.
 */
export interface PgPool {
  query(text: string): Promise<unknown>;
  connect(): Promise<PgPoolClient>;
  end(): Promise<void>;
  /** pg's Pool keeps its connection settings here; the store's listener reuses them. */
  readonly options?: object;
}

/** The part of a checked-out `pg.PoolClient` leasehold uses. */
export interface PgPoolClient {
  query(text: string, values?: readonly unknown[]): Promise<unknown>;
  release(destroy?: boolean | Error): void;
  on?(event: 'error', listener: (err: Error) => void): unknown;
  removeListener?(event: 'error', listener: (err: Error) => void): unknown;
}

/**
 * Checks out a connection and keeps an 'error' listener on it while it is out: a checked-out
 * pg client whose backend dies between queries emits 'error', which would otherwise crash
 * the process. The error also surfaces on the next query. `done` releases it, destroying it
 * when it failed.
 */
export async function checkout(
  pool: PgPool,
  what: string,
  timeoutMs?: number,
): Promise<{ client: PgPoolClient; done: (err?: unknown) => void }> {
  let client: PgPoolClient;
  try {
    const connecting = pool.connect();
    client =
      timeoutMs === undefined
        ? await connecting
        : await answerWithin(connecting, timeoutMs, `${what}: getting a connection`, (late) =>
            late.release(true),
          );
  } catch (err) {
    throw unavailable(what, err);
  }
  let failed: Error | undefined;
  const onError = (err: Error): void => {
    failed = err;
  };
  client.on?.('error', onError);
  return {
    client,
    done: (err?: unknown) => {
      client.removeListener?.('error', onError);
      const broken = err === undefined || err === false ? failed : err;
      client.release(broken === undefined ? false : broken instanceof Error ? broken : true);
    },
  };
}

/** Connection settings for a connection leasehold opens itself (pg `ClientConfig`). */
export type PgConnectionConfig = Readonly<Record<string, unknown>>;

/** How a Postgres-backed part of leasehold reaches the database: exactly one of these. */
export interface PostgresConnectionOptions {
  /**
   * Your own pool. leasehold never ends it; `close()` leaves it open. Every statement
   * leasehold sends is self-contained (no session state), so a transaction-mode pooler in
   * front is fine for leases; waiting needs a real session (see `listenConnection`).
   */
  readonly pool?: PgPool;
  /** A connection string (`postgres://user@host:5432/db`); leasehold opens and ends its own pool. */
  readonly connectionString?: string;
  /** pg connection settings; leasehold opens and ends its own pool. */
  readonly connection?: PgConnectionConfig;
  /**
   * Size of the pool leasehold opens itself (ignored with `pool`). Defaults to 10.
   */
  readonly maxConnections?: number;
}

/** A resolved connection: the pool to use, whether we own it, and settings for extra sessions. */
export interface ResolvedConnection {
  readonly pool: PgPool;
  readonly ownPool: boolean;
  /** Settings for a dedicated session (the listener), when known. */
  readonly sessionConfig: PgConnectionConfig | undefined;
  /**
   * With a pool leasehold opened itself: the process ids of the backends its connections
   * are connected to right now (a connection's id is added when it connects and removed when
   * the pool drops it), so that a notification can be told to come from one of our own
   * statements (decision 022). Undefined with the caller's pool, which others may use too.
   */
  readonly backends?: ReadonlySet<number>;
}

/** Validates and opens the connection options shared by the store, migrations, epoch and fence. */
export function resolveConnection(
  options: PostgresConnectionOptions,
  extra: { listenConnection?: PgConnectionConfig | string } = {},
): ResolvedConnection {
  const given = [options.pool, options.connectionString, options.connection].filter(
    (x) => x !== undefined,
  );
  if (given.length !== 1) {
    throw invalidArgument(
      'pool',
      'exactly one of pool, connectionString or connection must be given',
      `${given.length} of them`,
    );
  }
  const listen =
    typeof extra.listenConnection === 'string'
      ? { connectionString: extra.listenConnection }
      : extra.listenConnection;
  if (options.pool !== undefined) {
    const pool = options.pool;
    if (typeof pool.query !== 'function' || typeof pool.connect !== 'function') {
      throw invalidArgument('pool', 'must be a pg.Pool', pool);
    }
    const fromPool = pool.options as PgConnectionConfig | undefined;
    return { pool, ownPool: false, sessionConfig: listen ?? fromPool };
  }
  const max = options.maxConnections ?? 10;
  if (!Number.isInteger(max) || max < 1 || max > 1000) {
    throw invalidArgument('maxConnections', 'must be an integer from 1 to 1000', max);
  }
  let config: PgConnectionConfig;
  if (options.connectionString !== undefined) {
    if (typeof options.connectionString !== 'string' || options.connectionString === '') {
      throw invalidArgument(
        'connectionString',
        'must be a non-empty string',
        options.connectionString,
      );
    }
    config = { connectionString: options.connectionString };
  } else {
    if (typeof options.connection !== 'object' || options.connection === null) {
      throw invalidArgument('connection', 'must be an object of pg settings', options.connection);
    }
    config = options.connection;
  }
  const pool = new pg.Pool({ ...config, max });
  // An idle pooled connection that dies (server restart, pg_terminate_backend) emits
  // 'error' on the pool; unhandled, that would crash the process. The next query reconnects.
  pool.on('error', () => undefined);
  const backends = new Set<number>();
  const pid = (client: unknown): unknown => (client as { processID?: unknown }).processID;
  pool.on('connect', (client) => {
    const id = pid(client);
    if (typeof id === 'number') backends.add(id);
  });
  pool.on('remove', (client) => {
    const id = pid(client);
    if (typeof id === 'number') backends.delete(id);
  });
  return { pool, ownPool: true, sessionConfig: listen ?? config, backends };
}

/**
 * Renders a string as an SQL literal that means the same whatever
 * `standard_conforming_strings` is: backslashes force the `E''` form with doubled
 * backslashes. NUL cannot be stored in Postgres text and is refused.
 */
export function quoteLiteral(value: string): string {
  if (value.includes('\u0000')) throw invalidArgument('text', 'must not contain NUL', value);
  const body = value.replaceAll("'", "''");
  return body.includes('\\') ? ` E'${body.replaceAll('\\', '\\\\')}'` : `'${body}'`;
}

/** A parameter of a rendered statement. */
export type SqlParam = string | bigint | number | null | readonly (string | null)[];

/**
 * Replaces `$1 … $n` in `sql` with literals. Statements go out as one simple-protocol
 * message together with their `SET LOCAL` timeouts (one round trip, each statement bounded),
 * and the simple protocol takes no bind parameters. The statement texts are ours and contain
 * no `$` inside literals.
 */
export function renderSql(sql: string, params: readonly SqlParam[]): string {
  return sql.replace(/\$(\d+)/g, (_m, digits: string) => renderParam(params, digits));
}

/**
 * {@link renderSql} for one statement text, split at its `$n` once: each call joins the
 * parts with the rendered parameters instead of scanning the text again. Same output, same
 * errors (a missing parameter is reported when a call lacks it).
 */
export function compileSql(sql: string): (params: readonly SqlParam[]) => string {
  const pieces = sql.split(/\$(\d+)/);
  // Odd positions are the digits of a `$n`, even ones the text between.
  return (params) => {
    let out = pieces[0]!;
    for (let i = 1; i < pieces.length; i += 2) {
      out += renderParam(params, pieces[i]!) + pieces[i + 1]!;
    }
    return out;
  };
}

/** What {@link quoteLiteral} changes or refuses in a string. */
const NEEDS_QUOTING = /['\\\u0000]/;

function renderParam(params: readonly SqlParam[], digits: string): string {
  const i = Number(digits) - 1;
  if (i < 0 || i >= params.length) throw new Error(`statement refers to missing $${digits}`);
  const v = params[i];
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'object') {
    if (v.length === 0) return `'{}'::text[]`;
    // Elements with no quote, backslash or NUL quote as themselves: one scan of all of them
    // instead of three per element (a renewMany of 2,000 leases renders four such arrays).
    if (!v.includes(null) && !NEEDS_QUOTING.test(v.join(''))) {
      return `ARRAY['${v.join("', '")}']::text[]`;
    }
    return `ARRAY[${v.map((x) => (x === null ? 'NULL' : quoteLiteral(x))).join(', ')}]::text[]`;
  }
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new Error(`parameter $${digits} is not a safe integer`);
    return String(v);
  }
  return quoteLiteral(v);
}

/** The name of the NOTIFY channel of one lease table: short, fixed length, unique per table. */
export function channelName(schema: string, table: string): string {
  const digest = createHash('sha256').update(`${schema}\u0000${table}`).digest('hex');
  return `leasehold_${digest.slice(0, 32)}`;
}

/** A query result, as pg gives it for one statement. */
export interface PgResult {
  readonly rows: Array<Record<string, unknown>>;
  readonly rowCount: number | null;
}

/** Parses an int8 that the statement cast to text. Never goes through a JS number. */
export const parseBigint = (value: unknown): bigint => parseInt8Text(value, 'PostgreSQL');

/** One statement's result of a multi-statement message (negative: from the end). */
export function resultAt(answer: unknown, index: number): PgResult {
  const list = Array.isArray(answer) ? (answer as unknown[]) : [answer];
  const r = list[index < 0 ? list.length + index : index] as PgResult | undefined;
  if (r === undefined || !Array.isArray(r.rows)) {
    throw new LeaseholdError('ERR_PROTOCOL', 'PostgreSQL returned no result rows');
  }
  return r;
}

/** pg answers a multi-statement simple query with one result per statement; we need the last. */
export function lastResult(answer: unknown): PgResult {
  const r = Array.isArray(answer) ? (answer[answer.length - 1] as unknown) : answer;
  if (typeof r !== 'object' || r === null || !Array.isArray((r as PgResult).rows)) {
    throw new LeaseholdError('ERR_PROTOCOL', 'PostgreSQL returned no result rows');
  }
  return r as PgResult;
}

/** The `SET LOCAL` prefix that bounds every statement of one request by its timeout. */
export function timeoutPrefix(timeoutMs: number): string {
  const ms = timeoutSettingMs(timeoutMs);
  return `SET LOCAL statement_timeout = ${ms}; SET LOCAL lock_timeout = ${ms}; `;
}

/**
 * A request's timeout as the value of a timeout setting: whole ms from 1 to the largest
 * value PostgreSQL accepts, as {@link timeoutPrefix} sets it.
 */
export function timeoutSettingMs(timeoutMs: number): number {
  return Math.max(1, Math.min(2_147_483_647, Math.floor(timeoutMs)));
}

/** `client` with every query bounded by `ms` on this side ({@link answerWithin}). */
export function boundedClient(client: PgPoolClient, ms: number, what: string): PgPoolClient {
  return {
    query: (text, values) =>
      answerWithin(
        values === undefined ? client.query(text) : client.query(text, values),
        ms,
        what,
      ),
    release: (destroy) => client.release(destroy),
  };
}
