/**
 * A candidate process for the multi-process election test (not a test file itself).
 * argv[2]: JSON { store: 'sqlite', path } | { store: 'etcd', endpoints }, plus name, id,
 * fencePath, ttlMs. Prints one JSON event per line on stdout:
 *   elected {epoch} · write {epoch, applied, believedLeader} · observed {epoch|null} · stepped_down {epoch}
 * The leader writes to a fenced SQLite resource every 100 ms. After its leadership ends
 * (e.g. it was SIGSTOPped past its TTL) it still sends ONE more write with its old epoch — the
 * late write a paused process would make — and the fence must reject it.
 */
import Database from 'better-sqlite3';
import { setTimeout as sleep } from 'node:timers/promises';
import { LeaseClient } from '../../src/core/client.js';
import { Election } from '../../src/core/election.js';
import type { LeaseStore } from '../../src/core/store.js';
import { EtcdLeaseStore } from '../../src/stores/etcd/store.js';
import { SqliteLeaseStore } from '../../src/stores/sqlite/store.js';
import { openStore } from '../../src/stores/open-store.js';

interface Config {
  readonly store: 'sqlite' | 'etcd' | 'url';
  readonly path?: string;
  readonly endpoints?: string[];
  /** A store URL (`postgres://…`, `redis://…`) opened with openStore. */
  readonly url?: string;
  readonly name: string;
  readonly id: string;
  readonly fencePath: string;
  readonly ttlMs: number;
}

const cfg = JSON.parse(process.argv[2]!) as Config;
const emit = (ev: Record<string, unknown>): void => {
  process.stdout.write(
    `${JSON.stringify({ ...ev, id: cfg.id, at: Date.now() }, (_k, v: unknown) =>
      typeof v === 'bigint' ? v.toString() : v,
    )}\n`,
  );
};

const store: LeaseStore =
  cfg.store === 'url'
    ? await openStore(cfg.url!)
    : cfg.store === 'sqlite'
      ? new SqliteLeaseStore({ path: cfg.path! })
      : new EtcdLeaseStore({ hosts: cfg.endpoints!, minTtlMs: 1000 });
const client = new LeaseClient({ store, ownerId: cfg.id });
const election = new Election({ client, name: cfg.name, ttl: cfg.ttlMs });

const fence = new Database(cfg.fencePath, { timeout: 5000 });
fence.pragma('journal_mode = WAL');
fence.defaultSafeIntegers(true);
// One statement decides: the high-water mark only moves up, and only for a current epoch.
const advance = fence.prepare('UPDATE fence SET hwm = :epoch WHERE id = 1 AND hwm <= :epoch');
const log = fence.prepare('INSERT INTO writes (epoch, writer) VALUES (:epoch, :writer)');
const fencedWrite = fence.transaction((epoch: bigint): boolean => {
  if (advance.run({ epoch }).changes !== 1) return false;
  log.run({ epoch, writer: cfg.id });
  return true;
});

await election.observe((view) => emit({ ev: 'observed', epoch: view.leader?.epoch ?? null }), {
  pollInterval: 250,
});

for (;;) {
  const r = await election.campaign({ value: cfg.id });
  if (r.status !== 'elected') continue;
  const { leadership } = r;
  emit({ ev: 'elected', epoch: leadership.epoch });
  for (;;) {
    const believedLeader = leadership.isLeader();
    const applied = fencedWrite(leadership.epoch);
    emit({ ev: 'write', epoch: leadership.epoch, applied, believedLeader });
    if (!believedLeader) break;
    await sleep(100);
  }
  emit({ ev: 'stepped_down', epoch: leadership.epoch });
  await leadership.resign();
}
