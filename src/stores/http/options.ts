import { invalidArgument } from '../../core/errors.js';
import { booleanOption, integerOption } from '../../core/runtime/options.js';
import type { StoreCapabilities } from '../../core/types.js';
import { DEFAULT_BATCH_LIMITS, type BatchLimits } from './batch.js';
import { parseServerUrl } from './server-url.js';

/** Options for {@link HttpLeaseStore}. */
export interface HttpLeaseStoreOptions {
  /** The server's base URL, e.g. `http://127.0.0.1:7400`. */
  readonly url: string;
  /** Bearer token, when the server requires one. Defaults to none. */
  readonly apiToken?: string;
  /**
   * What the store behind the server can do. {@link HttpLeaseStore.connect} asks the server;
   * the constructor defaults to conservative values (`timeAuthority: 'store'`,
   * `tokenDurability: 'best_effort'`, 100 ms minimum TTL, no `tokenBlocks`). Claim
   * `tokenBlocks` only for a server whose `/v1/info` says so: another server refuses an acquire
   * with a block (400, `ERR_INVALID_ARGUMENT`).
   */
  readonly capabilities?: Partial<StoreCapabilities>;
  /** Extra CA certificates (PEM) to trust for an `https:` server. Defaults to the system's. */
  readonly ca?: string | Buffer;
  /** Attempts per request when the connection fails in a way that is safe to retry. Defaults to 3. */
  readonly attempts?: number;
  /**
   * Send the acquire, renew and release requests of one event-loop turn as one
   * `POST /v1/batch` (see {@link RequestBatcher}). Defaults to true; `connect` sizes batches by
   * the server's limits, and a server without the route turns it off by itself.
   */
  readonly batch?: boolean | BatchLimits;
  /**
   * Where an acquire with `wait` waits. `true`: in the server's queue for the key, as one long
   * poll — the server grants its waiters in arrival order and a release wakes only the first
   * (see {@link HttpLeaseStore.acquireQueued}). `false`: in the client, woken by the server's
   * event stream; a client with `localSuccessors` needs this to pass a key it holds to its
   * own waiters without asking the server. Defaults to true.
   */
  readonly waitInServerQueue?: boolean;
}

/** The defaults of {@link HttpLeaseStoreOptions}. */
export const DEFAULTS = Object.freeze({
  attempts: 3,
  waitInServerQueue: true,
  /** A server's longest `wait` when `/v1/info` was not asked (the server's own default). */
  serverMaxWaitMs: 300_000,
  batch: DEFAULT_BATCH_LIMITS,
  capabilities: Object.freeze({
    timeAuthority: 'store',
    tokenDurability: 'best_effort',
    watch: 'push',
    sharedAcrossProcesses: true,
    minTtlMs: 100,
    ttlGranularityMs: 1,
    tokenBlocks: false,
  }) satisfies StoreCapabilities,
});

/** {@link HttpLeaseStoreOptions}, checked. */
export interface ResolvedHttpStoreOptions {
  readonly base: URL;
  /** The base URL without a trailing slash. */
  readonly url: string;
  /** Headers of every request: `accept`, and `authorization` with an `apiToken`. */
  readonly headers: Readonly<Record<string, string>>;
  readonly tls: { readonly ca?: string | Buffer };
  readonly attempts: number;
  /** Undefined when batching is off. */
  readonly batch: BatchLimits | undefined;
  readonly waitInServerQueue: boolean;
  readonly capabilities: StoreCapabilities;
}

/** Checks the options of an HTTP lease store; throws `ERR_INVALID_ARGUMENT` naming the field. */
export function resolveHttpStoreOptions(options: HttpLeaseStoreOptions): ResolvedHttpStoreOptions {
  const base = parseServerUrl(options);
  const headers: Record<string, string> = { accept: 'application/json' };
  if (options.apiToken !== undefined) {
    if (typeof options.apiToken !== 'string' || !/^[\x21-\x7e]{1,512}$/.test(options.apiToken)) {
      throw invalidArgument('apiToken', 'must be printable ASCII without spaces', '(hidden)');
    }
    headers['authorization'] = `Bearer ${options.apiToken}`;
  }
  const attempts = integerOption('attempts', options.attempts, DEFAULTS.attempts, 1, 10);
  const batch = options.batch ?? true;
  let limits: BatchLimits | undefined;
  if (batch !== false) {
    limits = batch === true ? DEFAULTS.batch : batch;
    if (
      !Number.isInteger(limits.maxOps) ||
      limits.maxOps < 1 ||
      !Number.isInteger(limits.maxBytes) ||
      limits.maxBytes < 1024
    ) {
      throw invalidArgument('batch', 'maxOps must be ≥ 1 and maxBytes ≥ 1024', batch);
    }
  }
  return {
    base,
    url: base.href.replace(/\/+$/, ''),
    headers,
    tls: options.ca === undefined ? {} : { ca: options.ca },
    attempts,
    batch: limits,
    waitInServerQueue: booleanOption(
      'waitInServerQueue',
      options.waitInServerQueue,
      DEFAULTS.waitInServerQueue,
    ),
    capabilities: Object.freeze({
      ...DEFAULTS.capabilities,
      ...options.capabilities,
      watch: 'push',
    }),
  };
}

/**
 * The options of a store made by `connect` from a server's `/v1/info` answer: the
 * capabilities it reports, and batch limits narrowed to its own (no batching when it does
 * not offer it).
 */
export function optionsFromInfo(
  options: HttpLeaseStoreOptions,
  info: Record<string, unknown>,
): HttpLeaseStoreOptions {
  const store = info['store'] as { capabilities?: Partial<StoreCapabilities> } | undefined;
  const caps = store?.capabilities ?? {};
  return {
    ...options,
    batch: batchLimits(options.batch, info['limits']),
    capabilities: {
      timeAuthority: caps.timeAuthority ?? DEFAULTS.capabilities.timeAuthority,
      tokenDurability: caps.tokenDurability ?? DEFAULTS.capabilities.tokenDurability,
      minTtlMs: Math.max(DEFAULTS.capabilities.minTtlMs, caps.minTtlMs ?? 0),
      ttlGranularityMs: caps.ttlGranularityMs ?? 1,
      // Only an explicit true: a client that sent blocks to a server whose store grants
      // single tokens would hand out tokens that later grants receive again.
      tokenBlocks: caps.tokenBlocks === true,
      // Only an explicit true: another server would refuse the field or grant without a delay.
      ...(caps.lockDelay === true ? { lockDelay: true } : {}),
      // Passed on as the server's store states them: behind a server on etcd the expiry in
      // every answer is still an observation (the server's clock plus the TTL), and a dead
      // holder's key may stay taken for the store's lag.
      ...(caps.expiryObservedBy === 'client' ? { expiryObservedBy: 'client' as const } : {}),
      ...(Number.isSafeInteger(caps.expiryLagMs) && caps.expiryLagMs! > 0
        ? { expiryLagMs: caps.expiryLagMs! }
        : {}),
    },
  };
}

/**
 * The batch limits to use with a server whose `/v1/info` said `limits`: the asked limits
 * narrowed to the server's; no batching when the server does not offer it.
 */
function batchLimits(
  asked: boolean | BatchLimits | undefined,
  limits: unknown,
): false | BatchLimits {
  if (asked === false) return false;
  const l = (typeof limits === 'object' && limits !== null ? limits : {}) as Record<
    string,
    unknown
  >;
  const ops = l['batchMaxOps'];
  const bytes = l['batchBodyLimitBytes'];
  const renewals = l['batchMaxRenewals'];
  if (typeof ops !== 'number' || typeof bytes !== 'number' || ops < 1 || bytes < 1024) return false;
  const want = asked === undefined || asked === true ? DEFAULTS.batch : asked;
  const serverRenewals = typeof renewals === 'number' && renewals >= 1 ? renewals : ops;
  return {
    maxOps: Math.min(want.maxOps, Math.floor(ops)),
    maxBytes: Math.min(want.maxBytes, Math.floor(bytes)),
    maxRenewals: Math.floor(Math.min(want.maxRenewals ?? serverRenewals, serverRenewals)),
  };
}
