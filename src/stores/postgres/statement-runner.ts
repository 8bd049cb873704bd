import { LeaseholdError } from '../../core/errors.js';
import {
  lastResult,
  renderSql,
  timeoutPrefix,
  type PgPool,
  type PgResult,
  type SqlParam,
} from '../../drivers/postgres/client.js';
import { storeError } from './errors.js';
import type { IncarnationWatch } from './incarnation.js';
import type { Commit, CommitModes } from './statements.js';

/**
 * Sends the PostgreSQL store's statements, each as one simple-protocol message (one implicit
 * transaction, one round trip) with its timeout and commit prefixes: once the migrations are
 * applied (`migrate`, retried after a failure), never after {@link close}. A driver error
 * rejects with `ERR_UNAVAILABLE`.
 */
export class StatementRunner {
  /** The last `SET LOCAL statement_timeout` prefix and its ms (requests share a timeout). */
  private lastTimeout = { ms: -1, prefix: '' };
  /** Whether the migrations are known to be applied (or are not ours to apply). */
  private migrated: boolean;
  private ready: Promise<void> | undefined;
  private closed = false;

  /**
   * `migrate` undefined: the migrations are not this store's to apply. `incarnation`: the
   * check sent first in every grant and renewal message and where its answers go (decision 042);
   * undefined when the store does not detect changes of incarnation.
   */
  constructor(
    private readonly pool: PgPool,
    private readonly commit: CommitModes,
    private readonly migrate: (() => Promise<unknown>) | undefined,
    private readonly incarnation?: { readonly check: string; readonly watch: IncarnationWatch },
  ) {
    this.migrated = migrate === undefined;
  }

  /** Sends one statement with its timeouts; its (last) result. */
  async run(
    statement: string,
    params: readonly SqlParam[],
    timeoutMs: number,
    commit: Commit,
  ): Promise<PgResult> {
    return lastResult(await this.send(renderSql(statement, params), timeoutMs, commit));
  }

  /** Sends rendered statements as one message (one implicit transaction); every result. */
  async runAll(statements: string, timeoutMs: number, commit: Commit): Promise<PgResult[]> {
    const answer = await this.send(statements, timeoutMs, commit);
    return (Array.isArray(answer) ? answer : [answer]) as PgResult[];
  }

  private send(rendered: string, timeoutMs: number, commit: Commit): Promise<unknown> {
    const text = timeoutPrefix(timeoutMs) + this.commit.prefix[commit] + rendered;
    // A release changes no token, so it may run before the check (decision 042): the next
    // grant or renewal on the connection checks.
    return commit === 'read' || commit === 'release' ? this.query(text) : this.write(text);
  }

  /**
   * Sends a message that grants or renews: after the incarnation check when the store detects changes
   * of incarnation. The check goes first so that a raised epoch is in place before anything
   * else in the transaction grants or renews; its answer is taken off, so callers see the
   * message's own results in the shape they expect.
   */
  async write(text: string): Promise<unknown> {
    const inc = this.incarnation;
    if (inc === undefined) return this.query(text);
    const answer = (await this.query(inc.check + text)) as PgResult[];
    inc.watch.observe(answer[0]);
    return answer.length === 2 ? answer[1] : answer.slice(1);
  }

  /** `SET LOCAL statement_timeout = ms; `, kept for the last ms (every request shares one). */
  statementTimeout(ms: number): string {
    if (this.lastTimeout.ms !== ms) {
      this.lastTimeout = { ms, prefix: `SET LOCAL statement_timeout = ${ms}; ` };
    }
    return this.lastTimeout.prefix;
  }

  /** Sends one message once the migrations are applied. */
  async query(text: string): Promise<unknown> {
    this.assertOpen();
    // No `options.signal.aborted` check here: the client never sends an aborted request, and
    // reading `signal` makes the client create an AbortController for every request.
    // Once migrated, no await before the query (one turn of the microtask queue less).
    if (!this.migrated) await this.ensureReady();
    try {
      return await this.pool.query(text);
    } catch (err) {
      throw storeError(err);
    }
  }

  /** Resolves once the migrations are applied (at once when they are not ours to apply). */
  ensureReady(): Promise<void> {
    const migrate = this.migrate;
    if (migrate === undefined) return Promise.resolve();
    this.ready ??= migrate().then(
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

  assertOpen(): void {
    if (this.closed) {
      throw new LeaseholdError('ERR_CLOSED', 'the PostgreSQL lease store was closed');
    }
  }

  /** Refuses every later request; answers false when it was already closed. */
  close(): boolean {
    if (this.closed) return false;
    this.closed = true;
    return true;
  }
}
