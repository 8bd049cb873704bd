import { randomUUID } from 'node:crypto';
import { LeaseClient } from '../../src/core/client.js';
import type { Lease } from '../../src/core/lease.js';
import type { PostgresFence } from '../../src/fencing/postgres.js';
import { PostgresLeaseStore } from '../../src/stores/postgres/store.js';
import { elapse, eventually } from './time.js';

/** One grant a client was answered, by the harness clock. */
export interface FailoverGrant {
  readonly id: string;
  readonly key: string;
  readonly token: bigint;
  /** 0: answered by the old primary; 1: by the promoted server. */
  readonly generation: 0 | 1;
  readonly askedAt: number;
  readonly at: number;
}

/** One fenced write: its id is what the resource's log records when it is applied. */
export interface FailoverWrite {
  readonly id: string;
  readonly grant: FailoverGrant;
  readonly sentAt: number;
  status: 'applied' | 'stale_fence' | 'duplicate' | 'error';
  /** The mark a `stale_fence` answer reported. */
  highWaterMark?: bigint;
}

/** Where the workers' clients point: a URL, changed once at the failover. */
export class Endpoint {
  generation: 0 | 1 = 0;
  constructor(public url: string) {}

  /** Points every worker at the promoted server (each reconnects before its next request). */
  moveTo(url: string): void {
    this.url = url;
    this.generation = 1;
  }
}

/** What the load recorded: every grant and write, in the order they happened. */
export class FailoverLog {
  readonly grants: FailoverGrant[] = [];
  readonly writes: FailoverWrite[] = [];

  /** Grants of `key` (all keys when omitted) answered by `generation`, asked for after `since`. */
  count(generation: 0 | 1, key?: string, since = 0): number {
    return this.grants.filter(
      (g) =>
        g.generation === generation && (key === undefined || g.key === key) && g.askedAt > since,
    ).length;
  }

  /**
   * Writes sent with a token that is not above the token of another grant of the same key
   * answered before the write was sent: the writes a fence must refuse.
   */
  isStale(w: FailoverWrite): boolean {
    return this.grants.some(
      (g) =>
        g.key === w.grant.key && g.id !== w.grant.id && g.at < w.sentAt && g.token >= w.grant.token,
    );
  }
}

/** Options of {@link FailoverLoad}. */
export interface FailoverLoadOptions {
  readonly endpoint: Endpoint;
  /** The schema of the lease table on every server. */
  readonly schema: string;
  readonly workers: number;
  readonly keys: readonly string[];
  readonly fence: PostgresFence;
  /** The fence's scope (and log scope) of a key. */
  readonly scope: (key: string) => string;
  /** The resource's own log: an INSERT of (scope, token, write id), run inside the fence. */
  readonly logSql: string;
  readonly log: FailoverLog;
  /** Whether the clients' stores detect the failover by themselves (decision 042). */
  readonly detect: boolean;
}

/**
 * A client of the lease table in `schema` at `url`, with short bounds: the primary may die.
 * `detect`: whether its store notices the failover by itself (decision 042).
 */
export function openClient(
  url: string,
  schema: string,
  ownerId: string,
  detect: boolean,
): LeaseClient {
  // Two connections: a grant, a renewal and a release of one worker rarely overlap.
  const store = new PostgresLeaseStore({
    connectionString: url,
    schema,
    maxConnections: 2,
    detectIncarnation: detect,
  });
  return new LeaseClient({ store, ownerId, requestTimeout: '1s' });
}

/**
 * Writes once through the fence under `grant`'s token, and logs the write in the resource's
 * own table inside the fenced transaction (so the log holds exactly the applied writes).
 */
export async function fencedWrite(
  o: Pick<FailoverLoadOptions, 'fence' | 'scope' | 'logSql' | 'log'>,
  grant: FailoverGrant,
): Promise<FailoverWrite> {
  const w: FailoverWrite = { id: randomUUID(), grant, sentAt: performance.now(), status: 'error' };
  o.log.writes.push(w);
  const scope = o.scope(grant.key);
  try {
    const r = await o.fence.write({ scope, token: grant.token }, (tx) =>
      tx.query(o.logSql, [scope, grant.token.toString(), w.id]),
    );
    w.status = r.status;
    if (r.status === 'stale_fence') w.highWaterMark = r.highWaterMark;
  } catch {
    w.status = 'error';
  }
  return w;
}

/**
 * A lock-set load: `workers` loops acquire a random key, write once through the fence under
 * the token, and release. Each worker's client follows the {@link Endpoint}: after it moves,
 * the worker closes its client and opens one on the new URL before its next request (the
 * clients reconnect; their URL changes). While the old primary is dead and the endpoint has
 * not moved yet, requests fail (`unavailable`) and the worker backs off.
 */
export class FailoverLoad {
  private stopping = false;
  private readonly done: Promise<void>;

  constructor(private readonly o: FailoverLoadOptions) {
    this.done = Promise.all(Array.from({ length: o.workers }, (_, i) => this.worker(i))).then(
      () => undefined,
    );
  }

  /** Stops every worker after its current step and closes their clients. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.done;
  }

  private async worker(i: number): Promise<void> {
    const { endpoint, keys, log } = this.o;
    let generation = endpoint.generation;
    let client = openClient(endpoint.url, this.o.schema, `w${i}`, this.o.detect);
    try {
      while (!this.stopping) {
        if (generation !== endpoint.generation) {
          await client.close().catch(() => undefined);
          generation = endpoint.generation;
          client = openClient(endpoint.url, this.o.schema, `w${i}`, this.o.detect);
        }
        const key = keys[Math.floor(Math.random() * keys.length)]!;
        const askedAt = performance.now();
        const r = await client.acquire(key, { ttl: '5s', wait: '200ms' }).catch(() => undefined);
        if (r === undefined || r.status === 'unavailable') {
          await elapse(20); // the primary is gone and the endpoint has not moved yet
          continue;
        }
        if (r.status !== 'acquired') continue;
        const grant: FailoverGrant = {
          id: randomUUID(),
          key,
          token: r.lease.token,
          generation,
          askedAt,
          at: performance.now(),
        };
        log.grants.push(grant);
        await fencedWrite(this.o, grant);
        await r.lease.release().catch(() => undefined);
      }
    } finally {
      await client.close().catch(() => undefined);
    }
  }
}

/** A holder across the failover: its grant is lost, and it never learns of the promotion. */
export interface AcrossHolder {
  readonly client: LeaseClient;
  readonly lease: Lease;
  readonly grant: FailoverGrant;
}

/** Acquires `key` on the old primary with a long TTL and writes once (applied). */
export async function holdAcross(
  o: Pick<FailoverLoadOptions, 'fence' | 'scope' | 'logSql' | 'log' | 'detect'>,
  url: string,
  schema: string,
  key: string,
): Promise<AcrossHolder> {
  const client = openClient(url, schema, 'holder-a', o.detect);
  const askedAt = performance.now();
  const r = await eventually(
    'holder A to be granted on the old primary',
    async () => {
      const a = await client.acquire(key, { ttl: '60s', wait: '1s' });
      return a.status === 'acquired' ? a : undefined;
    },
    { timeoutMs: 30_000 },
  );
  const grant: FailoverGrant = {
    id: randomUUID(),
    key,
    token: r.lease.token,
    generation: 0,
    askedAt,
    at: performance.now(),
  };
  o.log.grants.push(grant);
  await fencedWrite(o, grant);
  return { client, lease: r.lease, grant };
}
