import Database from 'better-sqlite3';
import { invalidArgument, LeaseholdError } from '../../core/errors.js';
import type { ClaimResult } from '../../core/results.js';
import { parseToken } from '../../core/validate.js';
import { SqliteFence } from '../sqlite.js';
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
} from './mark-store.js';

/** Options for {@link SqliteMarkStore}. */
export interface SqliteMarkStoreOptions {
  /** The database file. */
  readonly path: string;
  /** The mark table (the fence's); `<table>_version` and `<table>_answer` are ours. Defaults to `leasehold_gateway`. */
  readonly table?: string;
  /**
   * Hold the database file exclusively for the life of the process (SQLite's exclusive
   * locking mode), so a second process on the same file fails at start-up instead of
   * forwarding out of order. Defaults to true.
   */
  readonly exclusive?: boolean;
}

const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,40}$/;
/** Scopes whose mark is kept in memory (see `known`); the oldest is dropped beyond. */
const KNOWN_MARKS = 10_000;

/** Our tables next to the fence's. Idempotent. */
const CREATE = `
CREATE TABLE IF NOT EXISTS {{v}} (
  scope TEXT PRIMARY KEY NOT NULL,
  version INTEGER NOT NULL CHECK (version >= 0)
) STRICT;
CREATE TABLE IF NOT EXISTS {{a}} (
  scope TEXT NOT NULL,
  token INTEGER NOT NULL,
  op_key TEXT NOT NULL,
  state TEXT NOT NULL,
  status INTEGER,
  content_type TEXT,
  body BLOB,
  headers TEXT,
  PRIMARY KEY (scope, token, op_key)
) STRICT, WITHOUT ROWID;`;
/** Answer tables made before headers were kept get the column. Params: none. */
const ADD_HEADERS = `ALTER TABLE {{a}} ADD COLUMN headers TEXT`;
/** Params: none. Returns one row per column of the answer table. */
const ANSWER_COLUMNS = `SELECT name FROM pragma_table_info({{a_name}})`;

/** Params: scope. Returns version. */
const SELECT_VERSION = `SELECT version FROM {{v}} WHERE scope = @scope`;
/** Params: scope, version. */
const UPSERT_VERSION = `INSERT INTO {{v}} (scope, version) VALUES (@scope, @version)
ON CONFLICT (scope) DO UPDATE SET version = excluded.version`;
/** Params: scope, token, key, state, status, contentType, body, headers. */
const UPSERT_ANSWER = `INSERT INTO {{a}} (scope, token, op_key, state, status, content_type, body, headers)
VALUES (@scope, @token, @key, @state, @status, @contentType, @body, @headers)
ON CONFLICT (scope, token, op_key) DO UPDATE SET state = excluded.state, status = excluded.status,
  content_type = excluded.content_type, body = excluded.body, headers = excluded.headers`;
/** Params: scope, token, key. Returns state, status, content_type, body, headers. */
const SELECT_ANSWER = `SELECT state, status, content_type, body, headers FROM {{a}}
WHERE scope = @scope AND token = @token AND op_key = @key`;
/** Params: scope, token. Forgets the answers of older generations once the mark moved past them. */
const GC_ANSWERS = `DELETE FROM {{a}} WHERE scope = @scope AND token < @token`;

/**
 * Marks in a SQLite file, on {@link SqliteFence}: the fence's check-and-advance runs in one
 * `BEGIN IMMEDIATE` transaction (fsync'd, `synchronous = FULL`) together with the version
 * and the `pending` idempotency record, so all of them commit or none.
 *
 * One process per file (see `exclusive`): the gateway's in-flight ordering is per process.
 */
export class SqliteMarkStore implements MarkStore {
  readonly kind = 'sqlite';
  private readonly db: Database.Database;
  private readonly fences: Record<MarkPolicy, SqliteFence>;
  /**
   * The marks of recently used scopes, as last read or committed. Only with `exclusive`: no
   * other process can open the file, so nothing moves a mark behind this process's back and a
   * check of the current token needs no read of the database. Set only after a commit.
   */
  private readonly known: Map<string, bigint> | undefined;
  private readonly stmt: Record<
    'version' | 'setVersion' | 'setAnswer' | 'answer' | 'gc',
    Database.Statement
  >;

  constructor(options: SqliteMarkStoreOptions) {
    const path = options.path;
    if (typeof path !== 'string' || path === '' || path === ':memory:')
      throw invalidArgument('path', 'must be a database file path', path);
    const table = options.table ?? 'leasehold_gateway';
    if (!TABLE_NAME.test(table))
      throw invalidArgument('table', 'must be a plain SQL identifier', table);
    try {
      this.db = new Database(path, { timeout: 2000 });
      const exclusive = options.exclusive ?? true;
      if (exclusive) this.db.pragma('locking_mode = EXCLUSIVE');
      this.db.pragma('journal_mode = WAL');
      // FULL: a commit is fsync'd before check() resolves, so the mark precedes the forward on disk.
      this.db.pragma('synchronous = FULL');
      const sql = (text: string): string =>
        text
          .replaceAll('{{v}}', `"${table}_version"`)
          .replaceAll('{{a}}', `"${table}_answer"`)
          .replaceAll('{{a_name}}', `'${table}_answer'`);
      // The first write takes the exclusive lock: a second gateway on this file fails here.
      this.db.exec(sql(CREATE));
      const columns = this.db.prepare(sql(ANSWER_COLUMNS)).pluck().all() as string[];
      if (!columns.includes('headers')) this.db.exec(sql(ADD_HEADERS));
      this.known = exclusive ? new Map() : undefined;
      this.fences = {
        '>=': new SqliteFence({ database: this.db, table, policy: '>=' }),
        '>': new SqliteFence({ database: this.db, table, policy: '>' }),
      };
      this.stmt = {
        version: this.db.prepare(sql(SELECT_VERSION)).safeIntegers(true),
        setVersion: this.db.prepare(sql(UPSERT_VERSION)),
        setAnswer: this.db.prepare(sql(UPSERT_ANSWER)),
        answer: this.db.prepare(sql(SELECT_ANSWER)).safeIntegers(true),
        gc: this.db.prepare(sql(GC_ANSWERS)),
      };
    } catch (err) {
      if (err instanceof LeaseholdError) throw err;
      const busy = (err as { code?: unknown }).code === 'SQLITE_BUSY';
      throw new LeaseholdError(
        'ERR_UNAVAILABLE',
        busy
          ? `mark database ${path} is held by another process (one gateway per SQLite file)`
          : `cannot open mark database ${path}: ${String(err)}`,
        { cause: err },
      );
    }
  }

  // eslint-disable-next-line @typescript-eslint/require-await -- a promise like the other stores'; throws become rejections
  async check(request: MarkRequest): Promise<MarkDecision> {
    return this.checkSync(request);
  }

  private checkSync(request: MarkRequest): MarkDecision {
    const { scope, token, idempotencyKey: key, expectedVersion } = request;
    const fence = this.fences[request.policy];
    const fast = decideFromMark(request, this.markOf(scope), undefined);
    if (fast !== undefined) return fast;
    try {
      const r = fence.apply(
        scope,
        token,
        () => {
          let version: bigint | undefined;
          if (expectedVersion !== undefined) {
            const current = this.versionOf(scope);
            if (current !== expectedVersion) throw new VersionMismatch(current);
            version = current + 1n;
            this.stmt.setVersion.run({ scope, version });
          }
          this.stmt.gc.run({ scope, token });
          if (key !== undefined) this.writeAnswer(scope, token, key, { state: 'pending' });
          return version;
        },
        key === undefined ? {} : { opId: key },
      );
      switch (r.status) {
        case 'applied':
          // Committed: the mark is now this token.
          this.remember(scope, token);
          return { status: 'applied', wrote: true, version: r.value };
        case 'duplicate':
          return r;
        case 'stale_fence':
          this.remember(scope, r.highWaterMark);
          return r;
      }
    } catch (err) {
      if (err instanceof VersionMismatch)
        return { status: 'version_mismatch', version: err.version };
      throw err;
    }
  }

  // eslint-disable-next-line @typescript-eslint/require-await -- a promise like the other stores'; throws become rejections
  async claim(scope: string, token: bigint, policy: MarkPolicy): Promise<ClaimResult> {
    const t = parseToken(token);
    const r = this.fences[policy].claim(scope, t);
    // The mark moved (or was refused by a newer one): what `known` says must follow, or a
    // check of a lower token decided from it would pass.
    this.remember(scope, r.status === 'applied' ? t : r.highWaterMark);
    return r;
  }

  read(scope: string): Promise<{ highWaterMark: bigint; version: bigint }> {
    return Promise.resolve({ highWaterMark: this.markOf(scope), version: this.versionOf(scope) });
  }

  answer(scope: string, token: bigint, key: string): Promise<AnswerRecord | undefined> {
    const row = this.stmt.answer.get({ scope, token, key }) as
      | {
          state: string;
          status: bigint | null;
          content_type: string | null;
          body: Buffer | null;
          headers: string | null;
        }
      | undefined;
    if (row === undefined) return Promise.resolve(undefined);
    if (row.state === 'answered') {
      return Promise.resolve({
        state: 'answered',
        status: Number(row.status ?? 200),
        headers: decodeAnswerHeaders(row.headers, row.content_type),
        body: row.body ?? undefined,
      });
    }
    const state = row.state as 'pending' | 'not_sent' | 'unknown';
    return Promise.resolve({ state });
  }

  saveAnswer(scope: string, token: bigint, key: string, record: AnswerRecord): Promise<void> {
    this.writeAnswer(scope, token, key, record);
    return Promise.resolve();
  }

  private writeAnswer(scope: string, token: bigint, key: string, record: AnswerRecord): void {
    const answered = record.state === 'answered';
    const body =
      answered && record.body && record.body.length <= MAX_STORED_ANSWER_BYTES ? record.body : null;
    this.stmt.setAnswer.run({
      scope,
      token,
      key,
      state: record.state,
      status: answered ? record.status : null,
      contentType: answered ? (record.headers['content-type'] ?? null) : null,
      body,
      headers: answered ? encodeAnswerHeaders(record.headers) : null,
    });
  }

  private markOf(scope: string): bigint {
    const known = this.known?.get(scope);
    if (known !== undefined) return known;
    const mark = this.fences['>='].highWaterMark(scope);
    this.remember(scope, mark);
    return mark;
  }

  private remember(scope: string, mark: bigint): void {
    const known = this.known;
    if (known === undefined) return;
    if (known.size >= KNOWN_MARKS && !known.has(scope)) {
      const oldest = known.keys().next();
      if (oldest.done !== true) known.delete(oldest.value);
    }
    known.set(scope, mark);
  }

  private versionOf(scope: string): bigint {
    const row = this.stmt.version.get({ scope }) as { version: bigint } | undefined;
    return row?.version ?? 0n;
  }

  close(): Promise<void> {
    if (this.db.open) this.db.close();
    return Promise.resolve();
  }
}
