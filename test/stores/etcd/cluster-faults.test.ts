import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Etcd3 } from 'etcd3';
import { LeaseClient } from '../../../src/core/client.js';
import type { Lease } from '../../../src/core/lease.js';
import { EtcdLeaseStore } from '../../../src/stores/etcd/store.js';
import { EtcdCluster } from '../../support/etcd-cluster.js';
import { uniqueKey } from '../../support/keys.js';
import { elapse, eventually } from '../../support/time.js';

const TTL_MS = 2000;
const WORKERS = 4;
const PHASE_MS = 9000;
const FAULT_AT_MS = 1500;
/** TTL + session headroom + etcd's 500 ms expiry sweep + an election, with room for a loaded machine. */
const RESUME_BOUND_MS = 15_000;

interface Grant {
  readonly worker: number;
  readonly token: bigint;
  readonly invokedAt: number;
  readonly grantedAt: number;
  /** When the holder began its release. */
  readonly releasedAt: number;
  /**
   * The end of the holder's right to act: its release, or its lease's local deadline if that
   * came first (a holder is never told it may act past its deadline; the fence stops it).
   */
  readonly validUntil: number;
}

interface Figures {
  grants: Grant[];
  unavailable: number;
  faultAt: number;
  heldSurvived: number;
  heldLost: number;
  /** Grants whose local deadline passed before their holder released (the pause outlived them). */
  expiredWhileHeld: number;
}

/**
 * W-mutex under one fault: WORKERS clients (each with its own store and etcd connections)
 * contend for one key with short critical sections, and each also holds a renewed lease on
 * its own key throughout. `fault` runs FAULT_AT_MS into the phase. At most `maxHeldLost` of
 * the held leases may be lost by the fault; each lost one must read as lost and its key must
 * be taken again by another client.
 */
async function workload(
  cluster: EtcdCluster,
  key: string,
  fault: () => Promise<void>,
  maxHeldLost: number,
): Promise<Figures> {
  const stores = Array.from(
    { length: WORKERS },
    () => new EtcdLeaseStore({ hosts: cluster.endpoints, minTtlMs: 1000 }),
  );
  const clients = stores.map(
    (store, i) => new LeaseClient({ store, ownerId: `w${i}`, requestTimeout: '2s' }),
  );
  const figures: Figures = {
    grants: [],
    unavailable: 0,
    faultAt: 0,
    heldSurvived: 0,
    heldLost: 0,
    expiredWhileHeld: 0,
  };
  const t0 = performance.now();
  const held: Lease[] = [];
  try {
    for (let i = 0; i < WORKERS; i++) {
      const r = await clients[i]!.acquire(`${key}-own-${i}`, { ttl: TTL_MS });
      assert.equal(r.status, 'acquired');
      if (r.status === 'acquired') held.push(r.lease);
    }
    const faulting = (async () => {
      await elapse(FAULT_AT_MS);
      figures.faultAt = performance.now();
      await fault();
    })();
    await Promise.all(
      clients.map(async (c, i) => {
        // Run the phase, and past it (bounded) until a grant after the fault is seen: on a
        // loaded machine the first post-fault grant can come after the phase's end; the
        // resume bound is asserted separately.
        const resumed = (): boolean =>
          figures.faultAt > 0 && figures.grants.some((g) => g.grantedAt > figures.faultAt);
        while (
          performance.now() - t0 < PHASE_MS ||
          (!resumed() && performance.now() - t0 < FAULT_AT_MS + 4000 + RESUME_BOUND_MS + 2000)
        ) {
          const invokedAt = performance.now();
          const r = await c.acquire(key, { ttl: TTL_MS, wait: 3000 });
          if (r.status === 'unavailable') {
            figures.unavailable++;
            await elapse(50);
            continue;
          }
          if (r.status !== 'acquired') continue;
          const grantedAt = performance.now();
          await elapse(10 + Math.floor(Math.random() * 40));
          const releasedAt = performance.now();
          // The deadline on the same clock (performance.now): a grant whose validity began at
          // a keep-alive from before the pause may run out within this short hold.
          const validUntil = Math.min(releasedAt, r.lease.deadline);
          if (validUntil < releasedAt) figures.expiredWhileHeld++;
          figures.grants.push({
            worker: i,
            token: r.lease.token,
            invokedAt,
            grantedAt,
            releasedAt,
            validUntil,
          });
          await r.lease.release();
        }
      }),
    );
    await faulting;
    // A lease still valid locally must still be held at the store (checked on a healthy cluster).
    await cluster.waitHealthy();
    const lost: Array<{ lease: Lease; worker: number }> = [];
    for (const [worker, lease] of held.entries()) {
      if (lease.isValid()) {
        const state = await clients[0]!.inspect(lease.key);
        if (lease.isValid()) {
          assert.equal(
            state.holder?.token,
            lease.token,
            `${lease.key} valid locally but not held at etcd`,
          );
          figures.heldSurvived++;
          continue;
        }
      }
      // Lost (possibly during the inspect): the loss must be surfaced to its holder, and the
      // key must not stay taken — another client gets it, with a higher token, within TTL,
      // the session headroom and etcd's expiry sweep.
      figures.heldLost++;
      assert.equal(lease.status, 'lost', `${lease.key}: a lease no longer valid reads as lost`);
      assert.ok(lease.signal.aborted, `${lease.key}: the lost lease's signal aborted`);
      lost.push({ lease, worker });
    }
    assert.equal(figures.heldSurvived + figures.heldLost, WORKERS, 'every held lease accounted');
    assert.ok(
      figures.heldLost <= maxHeldLost,
      `${figures.heldLost} of ${WORKERS} held leases lost (at most ${maxHeldLost} may be here)`,
    );
    await Promise.all(
      lost.map(async ({ lease, worker }) => {
        const other = clients[(worker + 1) % WORKERS]!;
        const r = await other.acquire(lease.key, { ttl: TTL_MS, wait: RESUME_BOUND_MS });
        assert.equal(r.status, 'acquired', `${lease.key}: taken again after its holder lost it`);
        if (r.status === 'acquired') {
          assert.ok(r.lease.token > lease.token, `${lease.key}: the new holder's token is higher`);
          await r.lease.release();
        }
      }),
    );
  } finally {
    await Promise.all(held.map((l) => l.release()));
    await Promise.all(clients.map((c) => c.close()));
    await Promise.all(stores.map((s) => s.close()));
  }
  return figures;
}

/**
 * Replays etcd's own event history of `key`'s contender entries and checks that every
 * granted token's entry became the key's holder — the lowest live create revision — before
 * it was deleted: nobody was granted on an entry that never held the key (a waiter granted
 * although its entry expired while an older one still lived, as Jepsen found in etcd 3.4.3).
 * Waiters queue entries, so a granted entry may have been put while others lived; that it
 * was granted only once those had left is checked on the holders' side by
 * {@link assertHoldersDisjoint}.
 */
async function assertNoOverlapInHistory(
  raw: Etcd3,
  key: string,
  fromRev: bigint,
  grants: readonly Grant[],
): Promise<void> {
  const events: Array<{ type: 'put' | 'delete'; key: string; createRev: bigint; modRev: bigint }> =
    [];
  const watcher = await raw.watch().prefix(`${key}/`).startRevision(fromRev.toString()).create();
  watcher.on('data', (res) => {
    for (const ev of res.events) {
      events.push({
        type: ev.type === 'Put' ? 'put' : 'delete',
        key: ev.kv.key.toString(),
        createRev: BigInt(ev.kv.create_revision),
        modRev: BigInt(ev.kv.mod_revision),
      });
    }
  });
  const sentinel = `${key}/zz-end-of-history`;
  await raw.put(sentinel).value('x');
  await eventually('the history to replay', () =>
    events.some((e) => e.key === sentinel) ? true : undefined,
  );
  await watcher.cancel();
  const granted = new Set(grants.map((g) => g.token));
  const live = new Map<string, bigint>();
  const created = new Set<bigint>();
  const held = new Set<bigint>();
  for (const e of events) {
    if (e.key === sentinel) continue;
    if (e.type === 'delete') {
      live.delete(e.key);
    } else {
      live.set(e.key, e.createRev);
      if (e.createRev === e.modRev) created.add(e.createRev);
    }
    let lowest: bigint | undefined;
    for (const r of live.values()) if (lowest === undefined || r < lowest) lowest = r;
    if (lowest !== undefined) held.add(lowest);
  }
  for (const t of granted) {
    assert.ok(created.has(t), `granted token ${t} is an entry's put in etcd history`);
    assert.ok(held.has(t), `token ${t} was granted but its entry never held the key`);
  }
}

/**
 * The holders' own view: every grant came after the previous holder's right to act ended —
 * its release, or its lease's local deadline when that came first. Holds are 10–50 ms against
 * a 2 s TTL, but a grant made as the leader stops can carry a validity that began at the last
 * acknowledged keep-alive, and run out within the hold; then the store may grant the key
 * again once the holder's deadline has passed, never before.
 */
function holderOverlaps(grants: readonly Grant[]): string[] {
  const byGranted = [...grants].sort((a, b) => a.grantedAt - b.grantedAt);
  const found: string[] = [];
  for (let i = 1; i < byGranted.length; i++) {
    const prev = byGranted[i - 1]!;
    const next = byGranted[i]!;
    if (next.grantedAt < prev.validUntil) {
      found.push(
        `token ${next.token} was granted ${(prev.validUntil - next.grantedAt).toFixed(1)}ms before holder ${prev.token}'s right to act ended (${prev.validUntil < prev.releasedAt ? 'its deadline' : 'its release'})`,
      );
    }
  }
  return found;
}

function assertHoldersDisjoint(grants: readonly Grant[]): void {
  const overlaps = holderOverlaps(grants);
  assert.equal(overlaps.length, 0, overlaps[0]);
}

function assertTokens(grants: readonly Grant[]): void {
  const tokens = grants.map((g) => g.token);
  assert.equal(new Set(tokens).size, tokens.length, 'no token was granted twice');
  // I2: a grant that completed before another was invoked has the smaller token.
  const byGranted = [...grants].sort((a, b) => a.grantedAt - b.grantedAt);
  for (const b of grants) {
    for (const a of byGranted) {
      if (a.grantedAt >= b.invokedAt) break;
      assert.ok(a.token < b.token, `grant ${a.token} completed before ${b.token} was invoked`);
    }
  }
}

function report(label: string, f: Figures): void {
  const after = f.grants.filter((g) => g.grantedAt > f.faultAt);
  const resumeMs = after.length > 0 ? Math.min(...after.map((g) => g.grantedAt)) - f.faultAt : NaN;
  console.log(
    `[etcd ${label}] grants=${f.grants.length} after-fault=${after.length} unavailable=${f.unavailable} ` +
      `first-grant-after-fault=${resumeMs.toFixed(0)}ms held-leases survived=${f.heldSurvived} lost=${f.heldLost} ` +
      `grants-expired-while-held=${f.expiredWhileHeld}`,
  );
}

describe('etcd 3-member cluster under member faults', { timeout: 180_000 }, () => {
  let cluster: EtcdCluster;
  let raw: Etcd3;
  before(async () => {
    cluster = await EtcdCluster.start({ size: 3, label: 'faults' });
    raw = new Etcd3({ hosts: cluster.endpoints });
  });
  after(async () => {
    raw?.close();
    await cluster?.stop();
  });

  async function revisionNow(): Promise<bigint> {
    const res = await raw.kv.range({ key: Buffer.from('\u0002probe') });
    return BigInt(res.header.revision);
  }

  it('kill -9 of the leader while leases are held and contended: no overlap, tokens increase, held leases survive, grants resume', async () => {
    const key = uniqueKey('etcd-kill');
    const fromRev = await revisionNow();
    let killed = -1;
    // The clients' connections to the killed member break at once and move to a live one, so a
    // held lease keeps renewing through the election; one lost on a loaded machine is allowed.
    const f = await workload(
      cluster,
      key,
      async () => {
        killed = await cluster.leaderIndex();
        await cluster.kill(killed);
      },
      1,
    );
    report('kill -9 leader', f);
    await cluster.restart(killed);
    assert.ok(
      f.grants.some((g) => g.grantedAt < f.faultAt),
      'grants before the fault',
    );
    const after = f.grants.filter((g) => g.grantedAt > f.faultAt);
    assert.ok(after.length > 0, 'grants resumed after the fault');
    const resumeMs = Math.min(...after.map((g) => g.grantedAt)) - f.faultAt;
    assert.ok(resumeMs < RESUME_BOUND_MS, `first grant ${resumeMs.toFixed(0)}ms after the kill`);
    assertTokens(f.grants);
    assertHoldersDisjoint(f.grants);
    await assertNoOverlapInHistory(raw, key, fromRev, f.grants);
  });

  /** The SIGSTOP run's figures, for the overlap check below (undefined if it did not finish). */
  let stopRun: Figures | undefined;

  it('SIGSTOP of the leader for 4 s, then SIGCONT: tokens increase, every grant held the key in etcd history, lost leases free their keys, grants resume', async () => {
    const key = uniqueKey('etcd-stop');
    const fromRev = await revisionNow();
    let paused = -1;
    // A keepalive stream on the paused member hangs for a third of the TTL before it retries
    // elsewhere, and the pause outlasts the 2 s TTL: every held lease may be lost.
    const f = await workload(
      cluster,
      key,
      async () => {
        paused = await cluster.leaderIndex();
        cluster.pause(paused);
        await elapse(4000);
        cluster.resume(paused);
      },
      WORKERS,
    );
    report('SIGSTOP leader', f);
    const after = f.grants.filter((g) => g.grantedAt > f.faultAt);
    assert.ok(after.length > 0, 'grants resumed after the pause');
    const resumeMs = Math.min(...after.map((g) => g.grantedAt)) - f.faultAt;
    assert.ok(resumeMs < RESUME_BOUND_MS, `first grant ${resumeMs.toFixed(0)}ms after the pause`);
    assertTokens(f.grants);
    await assertNoOverlapInHistory(raw, key, fromRev, f.grants);
    const overlaps = holderOverlaps(f.grants);
    console.log(`[etcd SIGSTOP leader] holder-overlaps=${overlaps.length} ${overlaps.join('; ')}`);
    stopRun = f;
  });

  // Seen on etcd 3.4.23 in about 1 run in 4 (docs/etcd.md, "Open: holders overlapping after a
  // leader pause"): a waiter granted up to ~40 ms before the previous holder's right to act
  // ended, with the signature of a resumed old leader revoking leases (etcd-io/etcd#12528,
  // #15247; fixed by etcd-io/etcd#16822 in 3.4.28 and 3.5.11). On those versions this check is
  // a todo — run and reported, not failing `npm test`; on a fixed etcd, and under
  // LEASEHOLD_CHAOS=1, it is a failing check.
  it('SIGSTOP of the leader: no two holders overlap by their own clocks', async (t) => {
    const version = (await raw.maintenance.status()).version;
    if (hasLeaderPauseRevocationBug(version) && process.env['LEASEHOLD_CHAOS'] !== '1') {
      t.todo(
        `etcd ${version} can revoke leases from a resumed old leader (etcd-io/etcd#12528, #15247; fixed in 3.4.28 / 3.5.11)`,
      );
    }
    assert.ok(stopRun !== undefined, 'the SIGSTOP run finished');
    assertHoldersDisjoint(stopRun.grants);
  });
});

/** True for the etcd versions before the fix of etcd-io/etcd#12528 (3.4.28, 3.5.11). */
function hasLeaderPauseRevocationBug(version: string): boolean {
  const [major = 0, minor = 0, patch = 0] = version.split('.').map((n) => Number.parseInt(n, 10));
  if (major !== 3) return major < 3;
  if (minor < 4) return true;
  if (minor === 4) return patch < 28;
  if (minor === 5) return patch < 11;
  return false;
}
