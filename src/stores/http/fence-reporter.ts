import { invalidArgument, LeaseholdError } from '../../core/errors.js';
import type { FenceDecision, FenceDecisionHook } from '../../core/fence-decision.js';
import { HttpApiError } from './errors.js';
import { PooledHttpTransport } from './pooled-transport.js';
import { parseServerUrl } from './server-url.js';

type FenceStatus = FenceDecision['status'];

const STATUSES: readonly FenceStatus[] = ['applied', 'duplicate', 'stale_fence'];

/** Options for {@link createFenceReporter}. */
export interface FenceReporterOptions {
  /** The lease server's base URL, e.g. `http://127.0.0.1:7400`. */
  readonly url: string;
  /** Bearer token with the `fence` verb on the keys reported. Defaults to none. */
  readonly apiToken?: string;
  /** Extra CA certificates (PEM) to trust for an `https:` server. Defaults to the system's. */
  readonly ca?: string | Buffer;
  /** A name for the protected resource shown with each decision, e.g. `billing-db`. Defaults to none. */
  readonly resource?: string;
  /**
   * The lease key a decision belongs to: the server authorises and filters events by it.
   * Defaults to the fence scope itself (the usual case: scope = lease key).
   */
  readonly keyOf?: (decision: FenceDecision) => string;
  /** Which results to report. Defaults to all: `applied`, `duplicate`, `stale_fence`. */
  readonly results?: readonly FenceStatus[];
  /** Reports in flight at most; decisions beyond are dropped (and counted). Defaults to 64. */
  readonly maxInFlight?: number;
  /** Timeout of each report. Defaults to 2000 ms. */
  readonly timeoutMs?: number;
  /** Told about each report that failed (server unreachable, token refused …). Defaults to none. */
  readonly onError?: (error: LeaseholdError, decision: FenceDecision) => void;
}

/** Counts of a {@link FenceReporter}. */
export interface FenceReporterStats {
  /** Reports the server accepted. */
  readonly sent: number;
  /** Reports that failed (see `onError`). */
  readonly failed: number;
  /** Decisions not sent: too many in flight, or the reporter was closed. */
  readonly dropped: number;
}

/** Sends fence decisions to a lease server's `POST /v1/fence-decisions`. */
export interface FenceReporter {
  /** The hook to give a fence as `onDecision`. Returns at once; never throws. */
  readonly onDecision: FenceDecisionHook;
  stats(): FenceReporterStats;
  /** Resolves when every report sent so far has been answered or has failed. */
  flush(): Promise<void>;
  /** Flushes, then closes the connections; later decisions are dropped. */
  close(): Promise<void>;
}

const RESOURCE = /^[\x21-\x7e]{1,128}$/;

/**
 * Reports the decisions of a fence (`SqliteFence`, `PostgresFence`, `RedisFence`) to a lease
 * server, which publishes them as `fence` events on its event stream and counts them in
 * `leasehold_fence_decisions_total{result}`; nothing is stored. Reporting is monitoring, not
 * part of the write: each decision is sent once in the background (no retries, at most
 * `maxInFlight` at a time), and a slow or unreachable server never delays or fails a write.
 *
 * @example
 * const reporter = createFenceReporter({ url: 'http://127.0.0.1:7400', resource: 'reports-db' });
 * const fence = new SqliteFence({ database: db, onDecision: reporter.onDecision });
 * // … on shutdown:
 * await reporter.close();
 */
export function createFenceReporter(options: FenceReporterOptions): FenceReporter {
  const base = parseServerUrl(options);
  const headers: Record<string, string> = {
    accept: 'application/json',
    'content-type': 'application/json',
  };
  if (options.apiToken !== undefined) {
    if (typeof options.apiToken !== 'string' || !/^[\x21-\x7e]{1,512}$/.test(options.apiToken)) {
      throw invalidArgument('apiToken', 'must be printable ASCII without spaces', '(hidden)');
    }
    headers['authorization'] = `Bearer ${options.apiToken}`;
  }
  const resource = options.resource;
  if (resource !== undefined && (typeof resource !== 'string' || !RESOURCE.test(resource))) {
    throw invalidArgument(
      'resource',
      'must be 1 to 128 printable ASCII characters without spaces',
      resource,
    );
  }
  const keyOf = options.keyOf ?? ((d: FenceDecision) => d.scope);
  if (typeof keyOf !== 'function') throw invalidArgument('keyOf', 'must be a function', keyOf);
  const results = new Set(options.results ?? STATUSES);
  for (const r of results) {
    if (!STATUSES.includes(r)) {
      throw invalidArgument('results', `must list only ${STATUSES.join(', ')}`, r);
    }
  }
  const maxInFlight = options.maxInFlight ?? 64;
  if (!Number.isInteger(maxInFlight) || maxInFlight < 1 || maxInFlight > 10_000) {
    throw invalidArgument('maxInFlight', 'must be an integer from 1 to 10000', maxInFlight);
  }
  const timeoutMs = options.timeoutMs ?? 2000;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 60_000) {
    throw invalidArgument('timeoutMs', 'must be an integer from 1 to 60000', timeoutMs);
  }
  const onError = options.onError;
  const transport = new PooledHttpTransport(
    base,
    options.ca === undefined ? {} : { ca: options.ca },
  );
  const inFlight = new Set<Promise<void>>();
  let sent = 0;
  let failed = 0;
  let dropped = 0;
  let closed = false;

  const fail = (error: LeaseholdError, d: FenceDecision): void => {
    failed++;
    try {
      onError?.(error, d);
    } catch {
      // the reporter's own callback must not break the fence's caller either
    }
  };

  const send = async (d: FenceDecision): Promise<void> => {
    let body: string;
    try {
      body = JSON.stringify({
        key: keyOf(d),
        token: d.token.toString(),
        result: d.status,
        scope: d.scope,
        ...(d.op === 'claim' ? { op: 'claim' } : {}),
        ...(resource === undefined ? {} : { resource }),
        ...(d.status === 'stale_fence' && d.highWaterMark !== undefined
          ? { highWaterMark: d.highWaterMark.toString() }
          : {}),
      });
    } catch (err) {
      return fail(
        new LeaseholdError('ERR_INVALID_ARGUMENT', `keyOf threw: ${String(err)}`, { cause: err }),
        d,
      );
    }
    let answer;
    try {
      answer = await transport.request('POST', '/v1/fence-decisions', headers, body, timeoutMs);
    } catch (err) {
      return fail(
        new LeaseholdError('ERR_UNAVAILABLE', `cannot report to ${base.origin}: ${String(err)}`, {
          cause: err,
        }),
        d,
      );
    }
    if (answer.status === 200) {
      sent++;
      return;
    }
    let code = `http_${answer.status}`;
    let message = `HTTP ${answer.status}`;
    try {
      const e = (JSON.parse(answer.text) as { error?: { code?: unknown; message?: unknown } })
        .error;
      if (typeof e?.code === 'string') code = e.code;
      if (typeof e?.message === 'string') message = e.message;
    } catch {
      // not JSON: keep the status
    }
    fail(
      new LeaseholdError(
        answer.status >= 500 ? 'ERR_UNAVAILABLE' : 'ERR_INVALID_ARGUMENT',
        `the lease server refused a fence decision (${code}): ${message}`,
        { cause: new HttpApiError(answer.status, code, message) },
      ),
      d,
    );
  };

  const onDecision: FenceDecisionHook = (d) => {
    if (!results.has(d.status)) return;
    if (closed || inFlight.size >= maxInFlight) {
      dropped++;
      return;
    }
    const p = send(d).finally(() => inFlight.delete(p));
    inFlight.add(p);
  };

  const flush = async (): Promise<void> => {
    while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
  };

  return {
    onDecision,
    stats: () => ({ sent, failed, dropped }),
    flush,
    async close() {
      closed = true;
      await flush();
      transport.close();
    },
  };
}
