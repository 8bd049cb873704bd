import { connect } from 'node:net';
import { isIP } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { formatDuration } from '../core/duration.js';
import { isLeaseholdError, LeaseholdError } from '../core/errors.js';
import { networkCause } from '../core/runtime/network-errors.js';
import { parseEtcdStoreUrl, parseRedisTopologyUrl } from '../stores/open-store.js';

/** The longest one try at the store waits for its answer at start. */
export const START_TRY_MS = 5000;

/** The longest the upstream check of `gateway` waits for a connection. */
const UPSTREAM_CHECK_MS = 3000;

const KINDS: Readonly<Record<string, { readonly name: string; readonly port?: number }>> = {
  postgres: { name: 'PostgreSQL', port: 5432 },
  postgresql: { name: 'PostgreSQL', port: 5432 },
  redis: { name: 'Redis', port: 6379 },
  rediss: { name: 'Redis', port: 6379 },
  'redis+cluster': { name: 'Redis Cluster' },
  'redis+sentinel': { name: 'Redis (Sentinel)' },
  etcd: { name: 'etcd' },
  etcds: { name: 'etcd' },
  http: { name: 'leasehold server', port: 80 },
  https: { name: 'leasehold server', port: 443 },
  sqlite: { name: 'SQLite' },
  memory: { name: 'memory' },
};

/** A store as the start-up messages name it, and the address a connection goes to. */
export interface StoreTarget {
  /** `PostgreSQL lease store at db:5432`: never the user name, the password or the query. */
  readonly what: string;
  /** Host and port, for a store reached over TCP. */
  readonly endpoint?: { readonly host: string; readonly port: number };
}

/** What {@link checkAtStart} says about the store at `url`, and where it connects. */
export function storeTarget(url: string, role: 'lease store' | 'mark store'): StoreTarget {
  const scheme = /^([a-z][a-z0-9+.-]*):/.exec(url)?.[1];
  const kind = scheme === undefined ? undefined : KINDS[scheme];
  if (kind === undefined) return { what: `${role} ${url}` };
  if (scheme === 'sqlite') return { what: `SQLite ${role} ${url.slice('sqlite:'.length)}` };
  if (scheme === 'memory') return { what: `memory ${role}` };
  if (scheme === 'etcd' || scheme === 'etcds') {
    try {
      const hosts = parseEtcdStoreUrl(url).hosts.map((h) => h.replace(/^https?:\/\//, ''));
      return { what: `etcd ${role} at ${hosts.join(',')}` };
    } catch {
      return { what: `etcd ${role}` };
    }
  }
  if (scheme === 'redis+cluster' || scheme === 'redis+sentinel') {
    try {
      const nodes = parseRedisTopologyUrl(url).topology.nodes.map((n) => `${n.host}:${n.port}`);
      return { what: `${kind.name} ${role} at ${nodes.join(',')}` };
    } catch {
      return { what: `${kind.name} ${role}` };
    }
  }
  try {
    const u = new URL(url);
    // pg and ioredis connect to localhost when the URL names no host.
    const host = u.hostname || 'localhost';
    const port = Number(u.port || kind.port);
    return {
      what: `${kind.name} ${role} at ${host}:${port}`,
      endpoint: { host: host.replace(/^\[|\]$/g, ''), port },
    };
  } catch {
    return { what: `${kind.name} ${role}` };
  }
}

/** The first line of an error's message, without a leading `Error: `. */
function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.split('\n')[0]!.replace(/^Error: /, '');
}

/** Why a try failed, in words: the connection's failure when there is one, else the message. */
export function failureWords(err: unknown): string {
  return networkCause(err)?.words ?? firstLine(err);
}

/** What {@link checkAtStart} needs. */
export interface StartCheck {
  /** The command, for messages: `serve`. */
  readonly command: string;
  /** What is checked, and where it is (see {@link storeTarget}). */
  readonly target: StoreTarget;
  /** The flag that sets `waitMs`, named in the messages: `--wait-for-store`. */
  readonly flag: string;
  /** How long to keep trying; 0 is one try. */
  readonly waitMs: number;
  /** One try; it rejects when the store did not answer. `signal` ends it after {@link START_TRY_MS}. */
  readonly attempt: (signal: AbortSignal) => Promise<void>;
  /** Where the one line "waiting up to …" goes (stderr). */
  readonly say: (line: string) => void;
}

/**
 * Why a try failed, in words. Some drivers report only that they gave up (ioredis: "Reached
 * the max retries per request limit"); then one TCP connection to the store's address says
 * whether the cause is there (refused, unresolvable, unreachable).
 */
async function explain(err: unknown, target: StoreTarget): Promise<string> {
  const cause = networkCause(err);
  if (cause !== undefined || target.endpoint === undefined) return failureWords(err);
  return (await probeTcp(target.endpoint.host, target.endpoint.port)) ?? firstLine(err);
}

/**
 * Tries the store until it answers or `waitMs` has passed (each try waits at most
 * {@link START_TRY_MS}; 250 ms between tries, doubling to 2 s), saying once that it waits.
 * Throws `ERR_UNAVAILABLE` with one line naming the store, its address and the last cause;
 * a usage error (`ERR_INVALID_ARGUMENT`) from a try is thrown at once.
 */
export async function checkAtStart(check: StartCheck): Promise<void> {
  const deadline = performance.now() + check.waitMs;
  let pause = 250;
  let said = false;
  for (;;) {
    const signal = AbortSignal.timeout(START_TRY_MS);
    let cause: string;
    try {
      await Promise.race([
        check.attempt(signal),
        new Promise<never>((_, reject) =>
          signal.addEventListener('abort', () => reject(new Error('timed out')), { once: true }),
        ),
      ]);
      return;
    } catch (err) {
      if (isLeaseholdError(err, 'ERR_INVALID_ARGUMENT')) throw err;
      cause = signal.aborted
        ? `no answer within ${formatDuration(START_TRY_MS)}`
        : await explain(err, check.target);
    }
    const left = deadline - performance.now();
    if (left <= 0) {
      const within = check.waitMs > 0 ? ` within ${formatDuration(check.waitMs)}` : '';
      const hint =
        check.waitMs > 0
          ? ''
          : ` (${check.flag} DURATION keeps trying at start, for services started in any order)`;
      throw new LeaseholdError(
        'ERR_UNAVAILABLE',
        `cannot reach the ${check.target.what}${within} (${cause}); ${check.command} did not start${hint}`,
      );
    }
    if (!said) {
      check.say(
        `leasehold ${check.command}: waiting up to ${formatDuration(check.waitMs)} for the ${check.target.what} (${cause})`,
      );
      said = true;
    }
    await sleep(Math.min(pause, left));
    pause = Math.min(pause * 2, 2000);
  }
}

/**
 * Whether `host` only takes connections from this machine: `localhost`, `127.x.x.x`, `::1`
 * (also as an IPv4-mapped address). Any other name or address may be reachable from elsewhere.
 */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1' || /^::ffff:127\./.test(h);
  return false;
}

/**
 * The start-up warning for a listener beyond loopback without bearer tokens, or undefined
 * when there is nothing to say.
 */
export function openListenerWarning(o: {
  readonly command: 'serve' | 'gateway';
  readonly host: string;
  readonly authEnabled: boolean;
  readonly allowed: boolean;
  /** What anyone who reaches the address can do, e.g. `take, renew and release any lease`. */
  readonly risk: string;
}): string | undefined {
  if (o.authEnabled || o.allowed || isLoopback(o.host)) return undefined;
  return (
    `leasehold ${o.command}: warning: listening on ${o.host} without auth: anyone who can ` +
    `reach this address can ${o.risk}. Give bearer tokens ("auth" in --config) or pass ` +
    `--allow-no-auth to silence this warning.`
  );
}

/**
 * Opens and closes one TCP connection to the upstream's host and port (bounded): undefined
 * when it connected, else why not, in words.
 */
export function probeUpstream(upstream: URL): Promise<string | undefined> {
  const port = Number(upstream.port || (upstream.protocol === 'https:' ? 443 : 80));
  return probeTcp(upstream.hostname.replace(/^\[|\]$/g, ''), port);
}

/** One TCP connection to `host:port`, closed at once (bounded): undefined, or why it failed. */
function probeTcp(host: string, port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (why: string | undefined): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(why);
    };
    const timer = setTimeout(
      () => done(`no connection within ${formatDuration(UPSTREAM_CHECK_MS)}`),
      UPSTREAM_CHECK_MS,
    );
    socket.once('connect', () => done(undefined));
    socket.once('error', (err) => done(failureWords(err)));
  });
}
