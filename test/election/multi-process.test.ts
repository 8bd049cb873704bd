import { randomBytes } from 'node:crypto';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { LeaseClient } from '../../src/core/client.js';
import { Election, type LeaderView } from '../../src/core/election.js';
import type { LeaseStore } from '../../src/core/store.js';
import { EtcdLeaseStore } from '../../src/stores/etcd/store.js';
import { SqliteLeaseStore } from '../../src/stores/sqlite/store.js';
import { openStore } from '../../src/stores/open-store.js';
import { dropSchema } from '../support/postgres.js';
import { EtcdCluster } from '../support/etcd-cluster.js';
import { uniqueKey } from '../support/keys.js';
import { eventually } from '../support/time.js';
import { tempDir } from '../support/tmp.js';

const CANDIDATE = fileURLToPath(new URL('./candidate.js', import.meta.url));
const CANDIDATES = 5;
const ROUNDS = 4;

interface Event {
  ev: 'elected' | 'write' | 'observed' | 'stepped_down';
  id: string;
  epoch: string | null;
  applied?: boolean;
  believedLeader?: boolean;
}

interface Candidate {
  readonly id: string;
  readonly proc: ChildProcess;
  readonly events: Event[];
}

/**
 * 5 candidate processes campaign on one election; the leader is repeatedly SIGKILLed or
 * SIGSTOPped past its TTL (and then resumed). Checks: epochs strictly increase, one leader
 * per epoch, the observer and every surviving follower see each change, the fence accepts
 * epochs only in non-decreasing order, and a resumed old leader's late write is rejected.
 */
async function runElection(
  storeConfig:
    | { store: 'sqlite'; path: string }
    | { store: 'etcd'; endpoints: string[] }
    | { store: 'url'; url: string },
  makeStore: () => LeaseStore | Promise<LeaseStore>,
  ttlMs: number,
): Promise<void> {
  const tmp = tempDir('election-mp');
  const fencePath = join(tmp.dir, 'fence.db');
  const fence = new Database(fencePath);
  fence.pragma('journal_mode = WAL');
  fence.defaultSafeIntegers(true);
  fence.exec(
    'CREATE TABLE fence (id INTEGER PRIMARY KEY, hwm INTEGER NOT NULL);' +
      'INSERT INTO fence VALUES (1, 0);' +
      'CREATE TABLE writes (seq INTEGER PRIMARY KEY AUTOINCREMENT, epoch INTEGER NOT NULL, writer TEXT NOT NULL);',
  );
  const name = uniqueKey('mp');
  const candidates = new Map<string, Candidate>();
  let next = 0;
  const spawnCandidate = (): Candidate => {
    const id = `c${next++}`;
    const proc = spawn(
      process.execPath,
      [CANDIDATE, JSON.stringify({ ...storeConfig, name, id, fencePath, ttlMs })],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const c: Candidate = { id, proc, events: [] };
    createInterface({ input: proc.stdout }).on('line', (line) => {
      try {
        c.events.push(JSON.parse(line) as Event);
      } catch {
        // not ours
      }
    });
    candidates.set(id, c);
    return c;
  };
  const store = await makeStore();
  const client = new LeaseClient({ store, ownerId: 'observer' });
  const election = new Election({ client, name, ttl: ttlMs });
  const views: LeaderView[] = [];
  const observation = await election.observe((v) => views.push(v), { pollInterval: 200 });
  const hwm = (): bigint => (fence.prepare('SELECT hwm FROM fence').get() as { hwm: bigint }).hwm;
  let staleRejected = 0;
  try {
    for (let i = 0; i < CANDIDATES; i++) spawnCandidate();
    let previousEpoch = 0n;
    for (let round = 0; round < ROUNDS; round++) {
      // A leader in office, newer than the last one, that has written through the fence.
      const leader = await eventually(
        `round ${round}: a new leader`,
        () => {
          const l = observation.current.leader;
          return l !== undefined && l.epoch > previousEpoch && hwm() >= l.epoch ? l : undefined;
        },
        { timeoutMs: 30_000 },
      );
      previousEpoch = leader.epoch;
      const victim = candidates.get(leader.value!)!;
      assert.ok(victim !== undefined, `leader ${leader.value} is one of ours`);
      if (round % 2 === 0) {
        victim.proc.kill('SIGKILL');
        candidates.delete(victim.id);
        spawnCandidate();
        continue;
      }
      // Pause the leader past its TTL; resume it only after a successor has written.
      victim.proc.kill('SIGSTOP');
      const successor = await eventually(
        `round ${round}: a successor while ${victim.id} is paused`,
        () => {
          const l = observation.current.leader;
          return l !== undefined && l.epoch > leader.epoch && hwm() >= l.epoch ? l : undefined;
        },
        { timeoutMs: 30_000 },
      );
      assert.notEqual(successor.value, victim.id);
      victim.proc.kill('SIGCONT');
      const late = await eventually(
        `round ${round}: ${victim.id}'s late write after resuming`,
        () =>
          victim.events.find(
            (e) =>
              e.ev === 'write' && e.epoch === leader.epoch.toString() && e.believedLeader === false,
          ),
        { timeoutMs: 20_000 },
      );
      assert.equal(
        late.applied,
        false,
        `the resumed old leader's write (epoch ${leader.epoch}) was rejected`,
      );
      staleRejected++;
      // The successor is the next round's victim.
      previousEpoch = leader.epoch;
    }
    // Every surviving follower observes the final leader.
    const final = await eventually('a final leader', () => observation.current.leader, {
      timeoutMs: 30_000,
    });
    for (const c of candidates.values()) {
      await eventually(`${c.id} to observe epoch ${final.epoch}`, () =>
        c.events.some((e) => e.ev === 'observed' && e.epoch === final.epoch.toString())
          ? true
          : undefined,
      );
    }
  } finally {
    observation.stop();
    for (const c of candidates.values()) {
      c.proc.kill('SIGCONT');
      c.proc.kill('SIGKILL');
    }
    await client.close();
    await store.close();
  }
  // Epochs strictly increase across the leaders the observer saw, one leader per epoch.
  const seen = views.filter((v) => v.leader !== undefined).map((v) => v.leader!);
  for (let i = 1; i < seen.length; i++) {
    assert.ok(seen[i]!.epoch >= seen[i - 1]!.epoch, 'observed epochs never go back');
  }
  const ownerOf = new Map<bigint, string>();
  for (const l of seen) {
    const prior = ownerOf.get(l.epoch);
    assert.ok(prior === undefined || prior === l.value, `epoch ${l.epoch} had two leaders`);
    ownerOf.set(l.epoch, l.value!);
  }
  const elected = [...candidates.values()]
    .flatMap((c) => c.events)
    .filter((e) => e.ev === 'elected');
  assert.equal(
    new Set(elected.map((e) => e.epoch)).size,
    elected.length,
    'every epoch elected once',
  );
  // I1 at the fence: accepted epochs never go down, in commit order.
  const writes = fence.prepare('SELECT epoch, writer FROM writes ORDER BY seq').all() as Array<{
    epoch: bigint;
    writer: string;
  }>;
  for (let i = 1; i < writes.length; i++) {
    assert.ok(
      writes[i]!.epoch >= writes[i - 1]!.epoch,
      'the fence accepted a lower epoch after a higher one',
    );
  }
  const writersPerEpoch = new Map<bigint, Set<string>>();
  for (const w of writes)
    writersPerEpoch.set(w.epoch, (writersPerEpoch.get(w.epoch) ?? new Set()).add(w.writer));
  for (const [epoch, ws] of writersPerEpoch)
    assert.equal(ws.size, 1, `epoch ${epoch} written by ${[...ws].join(', ')}`);
  const leaders = new Set(seen.map((l) => l.epoch));
  console.log(
    `[election ${storeConfig.store}] rounds=${ROUNDS} leaders-observed=${leaders.size} fenced-writes=${writes.length} ` +
      `stale-writes-rejected=${staleRejected} stale-writes-accepted=0`,
  );
  fence.close();
  tmp.remove();
}

describe('leader election across processes', { timeout: 240_000 }, () => {
  let cluster: EtcdCluster | undefined;
  after(async () => {
    await cluster?.stop();
  });

  it('on SQLite: 5 candidates, leader killed or paused repeatedly; epochs increase, one leader per epoch, stale writes rejected', async () => {
    const tmp = tempDir('election-sqlite');
    const path = join(tmp.dir, 'leases.db');
    try {
      await runElection({ store: 'sqlite', path }, () => new SqliteLeaseStore({ path }), 1500);
    } finally {
      tmp.remove();
    }
  });

  it('on PostgreSQL: the same, with the election in a fresh schema', async () => {
    const schema = `lh_election_${process.pid}_${randomBytes(4).toString('hex')}`;
    const url = `postgres://postgres@127.0.0.1:5432/test?schema=${schema}`;
    try {
      // Migrate once before the candidates start, so they race for leadership, not for DDL.
      await (await openStore(url)).close();
      await runElection({ store: 'url', url }, () => openStore(url), 1500);
    } finally {
      await dropSchema(schema);
    }
  });

  it('on Redis: the same, under a fresh key prefix', async () => {
    const url = `redis://127.0.0.1:6379?prefix=${encodeURIComponent(uniqueKey('election-redis'))}:`;
    await runElection({ store: 'url', url }, () => openStore(url), 1500);
  });

  it('on etcd: the same, with the election on etcd', async () => {
    cluster = await EtcdCluster.start({ size: 1, label: 'election' });
    const endpoints = cluster.endpoints;
    await runElection(
      { store: 'etcd', endpoints },
      () => new EtcdLeaseStore({ hosts: endpoints, minTtlMs: 1000 }),
      2000,
    );
  });
});
