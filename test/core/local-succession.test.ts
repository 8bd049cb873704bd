import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import { isLeaseholdError } from '../../src/core/errors.js';
import type { Lease } from '../../src/core/lease.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import type {
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreHandOffResult,
  StoreLeaseRef,
  StoreReleaseResult,
  StoreRenewResult,
  StoreRequestOptions,
} from '../../src/core/store.js';
import type { StoreCapabilities } from '../../src/core/types.js';
import { MemoryLeaseStore } from '../../src/stores/memory/store.js';

/** The memory store, with every call a client makes recorded (the store does the work). */
class CallLog extends MemoryLeaseStore {
  readonly calls: string[] = [];
  blocks: (number | undefined)[] = [];
  renewTokens: bigint[] = [];
  override readonly capabilities: StoreCapabilities;

  constructor(clock?: ManualClock, tokenBlocks = true) {
    super(clock === undefined ? {} : { clock });
    this.capabilities = { ...new MemoryLeaseStore().capabilities, tokenBlocks };
  }

  override tryAcquire(
    r: StoreAcquireRequest,
    o?: StoreRequestOptions,
  ): Promise<StoreAcquireResult> {
    this.calls.push('acquire');
    this.blocks.push(r.tokenBlock);
    return super.tryAcquire(r, o);
  }

  override renew(
    l: StoreLeaseRef & { ttlMs: number },
    o?: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    this.calls.push('renew');
    this.renewTokens.push(l.token);
    return super.renew(l, o);
  }

  override release(l: StoreLeaseRef, o?: StoreRequestOptions): Promise<StoreReleaseResult> {
    this.calls.push('release');
    return super.release(l, o);
  }

  override async releaseAndAcquire(
    release: StoreLeaseRef,
    acquire: StoreAcquireRequest,
    o: StoreRequestOptions,
  ): Promise<StoreHandOffResult> {
    this.calls.push('hand-off');
    this.blocks.push(acquire.tokenBlock);
    // The base class calls this.release / this.tryAcquire: keep those out of the log.
    const n = this.calls.length;
    const b = this.blocks.length;
    const answer = await super.releaseAndAcquire(release, acquire, o);
    this.calls.length = n;
    this.blocks.length = b;
    return answer;
  }
}

const OPTS = (): StoreRequestOptions => ({ timeoutMs: 1000, signal: new AbortController().signal });

function leaseOf(r: Awaited<ReturnType<LeaseClient['acquire']>>): Lease {
  assert.equal(r.status, 'acquired', `expected acquired, got ${r.status}`);
  return r.lease;
}

/** Resolves once `client.now()` has moved past `reading` (bounded: 1,000 tries of 1 ms). */
async function pastReading(client: LeaseClient, reading: number): Promise<void> {
  for (let i = 0; i < 1000 && client.now() <= reading; i++)
    await new Promise((resolve) => setTimeout(resolve, 1));
  assert.ok(client.now() > reading, 'the clock moved');
}

/**
 * `n` waiters on `key` that each release as soon as they hold; their leases in grant order.
 * With `renewFirst` (the default) the first lease is renewed once they all wait, so the store
 * lease was last proven live after they began: only such waiters may succeed locally.
 */
async function relay(
  client: LeaseClient,
  key: string,
  first: Lease,
  n: number,
  options: { ttl?: number; renewFirst?: boolean } = {},
): Promise<Lease[]> {
  const ttl = options.ttl ?? 10_000;
  const leases: Lease[] = [first];
  const waiters = Array.from({ length: n }, async () => {
    const lease = leaseOf(await client.acquire(key, { ttl, wait: 60_000 }));
    leases.push(lease);
    await lease.release();
  });
  if (options.renewFirst !== false) {
    await pastReading(client, client.now());
    assert.equal((await first.renew()).status, 'renewed');
  }
  await first.release();
  await Promise.all(waiters);
  return leases;
}

describe('local succession under one store lease (decision 007)', () => {
  it('passes the key to local waiters with the next tokens of the block, without a store call', async () => {
    const store = new CallLog();
    const client = new LeaseClient({ store, ownerId: 'a', localSuccessors: 3 });
    const first = leaseOf(await client.acquire('k', { ttl: 10_000 }));
    assert.deepEqual(store.blocks, [4], 'the grant reserved 1 + 3 tokens');
    const leases = await relay(client, 'k', first, 6);
    const tokens = leases.map((l) => l.token);
    // Blocks [t, t+3] and [t+4, t+7]: consecutive tokens, every one to one holder.
    assert.deepEqual(
      tokens,
      tokens.map((_, i) => first.token + BigInt(i)),
    );
    // Three local successors, then a store hand-off for a new block, then two more locals,
    // and the last holder's ordinary release.
    assert.deepEqual(store.calls, ['acquire', 'renew', 'hand-off', 'release']);
    assert.deepEqual(store.blocks, [4, 4]);
    // Locals act under the store lease that granted their block.
    for (let i = 1; i < 4; i++) {
      assert.equal(leases[i]!.leaseId, first.leaseId);
      assert.equal(leases[i]!.storeToken, first.token);
    }
    assert.notEqual(leases[4]!.leaseId, first.leaseId);
    const end = await store.inspect('k', OPTS());
    assert.equal(end.holder, undefined, 'the last holder released the store lease');
    assert.equal(end.lastToken, tokens[4]! + 3n, 'the block stays reserved');
    const next = leaseOf(await client.acquire('k', { ttl: 10_000 }));
    assert.equal(next.token, tokens[4]! + 4n, 'a later grant is above every reserved token');
    await next.release();
    assert.equal(client.heldLeases().length, 0);
    await client.close();
  });

  it('counts local successions toward maxHandOffRun, then releases to everyone', async () => {
    const store = new CallLog();
    const client = new LeaseClient({ store, ownerId: 'a', localSuccessors: 8, maxHandOffRun: 2 });
    const first = leaseOf(await client.acquire('k', { ttl: 10_000 }));
    const leases = await relay(client, 'k', first, 4);
    // first→w1, w1→w2 local; w2's release is ordinary (run of 2); w3 acquires at the store
    // (its own block), w3→w4 local; w4 releases.
    assert.deepEqual(store.calls, ['acquire', 'renew', 'release', 'acquire', 'release']);
    const tokens = leases.map((l) => l.token);
    assert.deepEqual(tokens.slice(0, 3), [first.token, first.token + 1n, first.token + 2n]);
    assert.equal(tokens[3], first.token + 9n, 'the next store grant is above the first block');
    assert.equal(tokens[4], tokens[3] + 1n);
    await client.close();
  });

  it('a successor inherits the store lease: same deadline, renewals under the store token', async () => {
    const clock = new ManualClock();
    const store = new CallLog(clock);
    const client = new LeaseClient({ store, clock, ownerId: 'a', localSuccessors: 2 });
    const first = leaseOf(await client.acquire('k', { ttl: 9_000, autoRenew: false }));
    const waiting = client.acquire('k', { ttl: 9_000, wait: 60_000 });
    // Renewed after the waiter began (so it may succeed locally); then 1 s of work.
    await clock.advance(1);
    assert.equal((await first.renew()).status, 'renewed');
    await clock.advance(1_000);
    await first.release();
    const second = leaseOf(await waiting);
    assert.equal(second.token, first.token + 1n);
    assert.equal(second.deadline, first.deadline, 'no fresh TTL: the store was not asked');
    assert.ok(second.remainingMs() <= 8_000);
    // Its background renewal is due a third of the TTL after the store lease's validity
    // began (the renewal at 1, not the successor's start), and renews by the store token.
    await clock.advance(1_999);
    assert.deepEqual(store.renewTokens, [first.token]);
    await clock.advance(1);
    assert.deepEqual(store.renewTokens, [first.token, first.token]);
    assert.ok(second.deadline > first.deadline, 'the renewal moved the deadline');
    assert.equal((await second.release()).status, 'released');
    assert.equal((await store.inspect('k', OPTS())).holder, undefined);
    await client.close();
  });

  it('ends a successor when the store lease expires: no local succession keeps it alive', async () => {
    const clock = new ManualClock();
    const store = new CallLog(clock);
    const client = new LeaseClient({ store, clock, ownerId: 'a', localSuccessors: 2 });
    const first = leaseOf(await client.acquire('k', { ttl: 3_000, autoRenew: false }));
    const waiting = client.acquire('k', { ttl: 3_000, wait: 60_000, autoRenew: false });
    await clock.advance(1);
    assert.equal((await first.renew()).status, 'renewed');
    await first.release();
    const second = leaseOf(await waiting);
    assert.equal(second.leaseId, first.leaseId, 'a local successor');
    await clock.advance(3_000);
    assert.equal(second.status, 'lost');
    assert.ok(isLeaseholdError(second.signal.reason, 'ERR_LEASE_LOST'));
    // The store agrees: the key is free, and the next grant is above the block.
    const other = new LeaseClient({ store, clock, ownerId: 'b' });
    const taken = leaseOf(await other.acquire('k', { ttl: 3_000 }));
    assert.equal(taken.token, first.token + 3n);
    await taken.release();
    await second.release();
    await client.close();
    await other.close();
  });

  it('never gives a block token to a waiter that began after the store lease was last proven live', async () => {
    // The story the simulation found: the store's clock jumps forward and expires A's store
    // lease while A still believes in it; B is granted a larger token; only then does A's
    // second task start waiting. A's release must not pass it a token of the old block.
    const clientClock = new ManualClock();
    const storeClock = new ManualClock();
    const store = new CallLog(storeClock);
    const a = new LeaseClient({ store, clock: clientClock, ownerId: 'a', localSuccessors: 3 });
    const b = new LeaseClient({ store, clock: clientClock, ownerId: 'b' });
    const first = leaseOf(await a.acquire('k', { ttl: 10_000, autoRenew: false }));
    await clientClock.advance(1);
    await storeClock.advance(20_000); // the store's clock jump: A's store lease has expired there
    const taken = leaseOf(await b.acquire('k', { ttl: 10_000, autoRenew: false }));
    assert.ok(taken.token > first.token + 3n, 'B is granted above A’s block');
    assert.ok(first.isValid(), 'A cannot tell: its own deadline is 10 s away');
    await clientClock.advance(1);
    const waiting = a.acquire('k', { ttl: 10_000, wait: 60_000, autoRenew: false });
    await clientClock.advance(1);
    await first.release();
    // No local succession: the release went to the store as a hand-off, which found B there.
    assert.deepEqual(store.calls, ['acquire', 'acquire', 'hand-off']);
    assert.equal((await taken.release()).status, 'released');
    const second = leaseOf(await waiting);
    assert.ok(second.token > taken.token, `${second.token} is above B's ${taken.token}`);
    assert.notEqual(second.leaseId, first.leaseId, 'a store grant of its own');
    await second.release();
    await a.close();
    await b.close();
  });

  it('a waiter that began before the store lease was last proven live still succeeds locally', async () => {
    const clock = new ManualClock();
    const store = new CallLog(clock);
    const client = new LeaseClient({ store, clock, ownerId: 'a', localSuccessors: 3 });
    const first = leaseOf(await client.acquire('k', { ttl: 10_000, autoRenew: false }));
    await clock.advance(1);
    const early = client.acquire('k', { ttl: 10_000, wait: 60_000, autoRenew: false });
    await clock.advance(1);
    assert.equal((await first.renew()).status, 'renewed');
    await clock.advance(1);
    const late = client.acquire('k', { ttl: 10_000, wait: 60_000, autoRenew: false });
    await clock.advance(1);
    await first.release();
    const second = leaseOf(await early);
    assert.equal(second.token, first.token + 1n, 'began before the renewal: the next token');
    assert.equal(second.leaseId, first.leaseId);
    await second.release();
    const third = leaseOf(await late);
    // Began after the renewal: a store hand-off, a block of its own.
    assert.equal(third.token, first.token + 4n);
    assert.notEqual(third.leaseId, first.leaseId);
    assert.deepEqual(store.calls, ['acquire', 'renew', 'hand-off']);
    await third.release();
    await client.close();
  });

  it('uses the store instead when the waiter asks for another TTL or value, or little time is left', async () => {
    const clock = new ManualClock();
    const store = new CallLog(clock);
    const client = new LeaseClient({ store, clock, ownerId: 'a', localSuccessors: 4 });
    const first = leaseOf(await client.acquire('k', { ttl: 10_000, autoRenew: false }));
    // Each waiter begins before its predecessor's renewal, so only the reason named stops
    // a local succession.
    const renewedAfterWaiter = async (lease: Lease): Promise<void> => {
      await clock.advance(1);
      assert.equal((await lease.renew()).status, 'renewed');
    };
    // Another TTL: the store's record would not say what the successor holds.
    const w1 = client.acquire('k', { ttl: 20_000, wait: 60_000, autoRenew: false });
    await renewedAfterWaiter(first);
    await first.release();
    const l1 = leaseOf(await w1);
    assert.notEqual(l1.leaseId, first.leaseId);
    // Another value, likewise.
    const w2 = client.acquire('k', { ttl: 20_000, wait: 60_000, value: 'x', autoRenew: false });
    await renewedAfterWaiter(l1);
    await l1.release();
    const l2 = leaseOf(await w2);
    assert.notEqual(l2.leaseId, l1.leaseId);
    assert.equal(l2.value, 'x');
    // Less than half the window left: a store grant gives the waiter a whole one.
    const w3 = client.acquire('k', { ttl: 20_000, wait: 60_000, value: 'x', autoRenew: false });
    await renewedAfterWaiter(l2);
    await clock.advance(12_000);
    await l2.release();
    const l3 = leaseOf(await w3);
    assert.notEqual(l3.leaseId, l2.leaseId);
    assert.ok(l3.remainingMs() > 19_000);
    assert.deepEqual(store.calls, [
      'acquire',
      'renew',
      'hand-off',
      'renew',
      'hand-off',
      'renew',
      'hand-off',
    ]);
    await l3.release();
    await client.close();
  });

  it('reports the release before the successor is acquired', async () => {
    const store = new CallLog();
    const client = new LeaseClient({ store, ownerId: 'a', localSuccessors: 2 });
    const seen: string[] = [];
    client.on('*', (e) => {
      if (e.type === 'acquired' || e.type === 'released') seen.push(`${e.type} ${e.token}`);
    });
    const first = leaseOf(await client.acquire('k', { ttl: 10_000 }));
    await relay(client, 'k', first, 1);
    const t = first.token;
    assert.deepEqual(seen, [
      `acquired ${t}`,
      `released ${t}`,
      `acquired ${t + 1n}`,
      `released ${t + 1n}`,
    ]);
    await client.close();
  });

  it('is off on a store without token blocks: hand-off through the store as before', async () => {
    const store = new CallLog(undefined, false);
    const client = new LeaseClient({ store, ownerId: 'a', localSuccessors: 4 });
    const first = leaseOf(await client.acquire('k', { ttl: 10_000 }));
    const leases = await relay(client, 'k', first, 2, { renewFirst: false });
    assert.deepEqual(store.blocks, [undefined, undefined, undefined]);
    assert.deepEqual(store.calls, ['acquire', 'hand-off', 'hand-off', 'release']);
    assert.equal(new Set(leases.map((l) => l.leaseId)).size, 3);
    await client.close();
  });

  it('a client closed with local waiters releases the store lease once', async () => {
    const store = new CallLog();
    const client = new LeaseClient({ store, ownerId: 'a', localSuccessors: 4 });
    const first = leaseOf(await client.acquire('k', { ttl: 10_000 }));
    const waiting = client.acquire('k', { ttl: 10_000, wait: 60_000 });
    await client.close();
    await assert.rejects(waiting, (err: unknown) => isLeaseholdError(err, 'ERR_CLOSED'));
    assert.equal(first.status, 'released');
    assert.deepEqual(store.calls, ['acquire', 'release']);
    assert.equal((await store.inspect('k', OPTS())).holder, undefined);
  });

  it('rejects a localSuccessors outside 0–63', () => {
    const store = new MemoryLeaseStore();
    for (const bad of [-1, 64, 1.5, Number.NaN, '2']) {
      assert.throws(
        () => new LeaseClient({ store, localSuccessors: bad as number }),
        (err: unknown) => isLeaseholdError(err, 'ERR_INVALID_ARGUMENT'),
        String(bad),
      );
    }
  });
});
