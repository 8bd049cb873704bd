/**
 * A worker process of the semaphore fault test (started with `child_process.fork`): a real
 * {@link LeaseClient} taking slots of one semaphore in a loop, and a SQLite resource whose
 * writes are fenced per slot. It writes whether or not its lease is still valid — a paused
 * process resumes mid-write — so the fence alone must refuse a stale slot holder.
 *
 * Every step is appended to its log file as one JSON line, synchronously, so a SIGKILL loses
 * at most the step in flight. Times are wall-clock ms (one machine: every worker shares it).
 */
import Database from 'better-sqlite3';
import { appendFileSync } from 'node:fs';
import { LeaseClient } from '../core/client.js';
import type { Lease } from '../core/lease.js';
import { SqliteFence } from '../fencing/sqlite.js';
import { retryWhileBusy, useDurableWal } from '../drivers/sqlite/open-file.js';
import { openStoreFromUrl } from './store-url.js';

/** What the test gives each worker (env `LEASEHOLD_SLOT_WORKER`, JSON). */
export interface SlotWorkerConfig {
  readonly name: string;
  readonly storeUrl: string;
  readonly resourcePath: string;
  readonly logPath: string;
  readonly semaphore: string;
  readonly limit: number;
  readonly ttlMs: number;
}

/** One line of a worker's log. `token` is a decimal string; `deadline` a wall-clock ms. */
export type SlotLogLine =
  | { readonly ev: 'grant'; readonly slot: number; readonly token: string; readonly at: number }
  | {
      readonly ev: 'deadline';
      readonly slot: number;
      readonly token: string;
      readonly deadline: number;
    }
  | {
      readonly ev: 'write';
      readonly slot: number;
      readonly token: string;
      readonly at: number;
      readonly status: 'applied' | 'duplicate' | 'stale_fence';
    }
  | { readonly ev: 'end'; readonly slot: number; readonly token: string; readonly at: number };

/**
 * The resource: one row per accepted write, in commit order (rowid). `slot_writes_unfenced` is
 * the control arm: the same writes with no fence, which must show stale writes landing.
 */
export const SLOT_WRITES_SCHEMA = `CREATE TABLE IF NOT EXISTS slot_writes (
  slot INTEGER NOT NULL, token TEXT NOT NULL, worker TEXT NOT NULL, at_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS slot_writes_unfenced (
  slot INTEGER NOT NULL, token TEXT NOT NULL, worker TEXT NOT NULL, at_ms INTEGER NOT NULL)`;

const config = JSON.parse(process.env.LEASEHOLD_SLOT_WORKER ?? '{}') as SlotWorkerConfig;

function log(line: SlotLogLine): void {
  appendFileSync(config.logPath, `${JSON.stringify(line)}\n`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The lease's local deadline on the wall clock, logged each time it moves. */
function logDeadline(client: LeaseClient, lease: Lease): void {
  const deadline = Date.now() + (lease.deadline - client.now());
  log({ ev: 'deadline', slot: lease.slot!, token: lease.token.toString(), deadline });
}

async function main(): Promise<void> {
  const store = await openStoreFromUrl(config.storeUrl);
  const client = new LeaseClient({ store, ownerId: config.name });
  const db = new Database(config.resourcePath, { timeout: 5000 });
  retryWhileBusy(5000, () => useDurableWal(db));
  db.exec(SLOT_WRITES_SCHEMA);
  const fence = new SqliteFence({ database: db });
  const unfenced = db.prepare(
    'INSERT INTO slot_writes_unfenced (slot, token, worker, at_ms) VALUES (?, ?, ?, ?)',
  );
  const insert = db.prepare(
    'INSERT INTO slot_writes (slot, token, worker, at_ms) VALUES (?, ?, ?, ?)',
  );
  client.on('renewed', (e) => {
    const lease = client.heldLeases().find((l) => l.key === e.key && l.token === e.token);
    if (lease !== undefined) logDeadline(client, lease);
  });
  process.send?.('ready');
  for (;;) {
    const r = await client.acquireSlot(config.semaphore, {
      limit: config.limit,
      ttl: config.ttlMs,
      wait: 5000,
      renewEvery: Math.floor(config.ttlMs / 4),
      // Claim before start: once granted, no lower token of this slot writes again.
      fences: [{ fence }],
    });
    if (r.status !== 'acquired') {
      await sleep(20);
      continue;
    }
    const lease = r.lease;
    const token = lease.token.toString();
    log({ ev: 'grant', slot: lease.slot, token, at: Date.now() });
    logDeadline(client, lease);
    const writes = 2 + Math.floor(Math.random() * 4);
    for (let i = 0; i < writes; i++) {
      // No validity check on purpose: a resumed process writes with what it had.
      const w = fence.apply(lease.key, lease.token, () =>
        insert.run(lease.slot, token, config.name, Date.now()),
      );
      log({ ev: 'write', slot: lease.slot, token, at: Date.now(), status: w.status });
      unfenced.run(lease.slot, token, config.name, Date.now());
      await sleep(20 + Math.floor(Math.random() * 100));
    }
    // Logged before the release is sent: from then on this worker claims no validity.
    log({ ev: 'end', slot: lease.slot, token, at: Date.now() });
    await lease.release();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`slot worker ${config.name}: ${String(err)}\n`);
  process.exit(1);
});
