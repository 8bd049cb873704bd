/**
 * A worker process of the multi-key fault test (started with `child_process.fork`): a real
 * {@link LeaseClient} taking random sets of 1–4 keys out of a pool with `acquireAll`, holding
 * each set briefly, then releasing it, until the test tells it to stop.
 *
 * Every step is appended to its log file as one JSON line, synchronously. Times are
 * wall-clock ms (one machine: every worker shares it). Tokens are decimal strings.
 */
import { appendFileSync } from 'node:fs';
import { LeaseClient } from '../core/client.js';
import { openStoreFromUrl } from './store-url.js';

/** What the test gives each worker (env `LEASEHOLD_MULTI_KEY_WORKER`, JSON). */
export interface MultiKeyWorkerConfig {
  readonly name: string;
  readonly storeUrl: string;
  readonly logPath: string;
  /** The pool's keys: each set is 1–4 distinct keys of these. */
  readonly keys: readonly string[];
  readonly ttlMs: number;
  readonly waitMs: number;
}

/** One line of a worker's log. */
export type MultiKeyLogLine =
  | {
      readonly ev: 'grant';
      /** When `acquireAll` was called and when it answered. */
      readonly asked: number;
      readonly at: number;
      /** Each key of the set and the token the store granted it. */
      readonly tokens: Readonly<Record<string, string>>;
    }
  | { readonly ev: 'end'; readonly at: number; readonly tokens: Readonly<Record<string, string>> }
  | {
      readonly ev: 'refused';
      readonly asked: number;
      readonly at: number;
      readonly status: string;
      readonly keys: readonly string[];
    };

const config = JSON.parse(process.env.LEASEHOLD_MULTI_KEY_WORKER ?? '{}') as MultiKeyWorkerConfig;

function log(line: MultiKeyLogLine): void {
  appendFileSync(config.logPath, `${JSON.stringify(line)}\n`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** 1–4 distinct keys of the pool, in a random order (acquireAll sorts them). */
function randomSet(): string[] {
  const pool = [...config.keys];
  const size = 1 + Math.floor(Math.random() * 4);
  const out: string[] = [];
  while (out.length < size) out.push(pool.splice(Math.floor(Math.random() * pool.length), 1)[0]!);
  return out;
}

async function main(): Promise<void> {
  const store = await openStoreFromUrl(config.storeUrl);
  const client = new LeaseClient({ store, ownerId: config.name });
  let stopping = false;
  process.on('message', () => {
    stopping = true;
  });
  process.send?.('ready');
  while (!stopping) {
    const keys = randomSet();
    const asked = Date.now();
    const r = await client.acquireAll(keys, { ttl: config.ttlMs, wait: config.waitMs });
    if (r.status !== 'acquired') {
      log({ ev: 'refused', asked, at: Date.now(), status: r.status, keys });
      await sleep(10);
      continue;
    }
    const tokens = Object.fromEntries([...r.leases.tokens].map(([k, t]) => [k, t.toString()]));
    log({ ev: 'grant', asked, at: Date.now(), tokens });
    await sleep(5 + Math.floor(Math.random() * 25));
    // Logged before the release is sent: from then on this worker claims none of the keys.
    log({ ev: 'end', at: Date.now(), tokens });
    await r.leases.release();
  }
  await client.close();
  await store.close();
  process.exit(0);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
