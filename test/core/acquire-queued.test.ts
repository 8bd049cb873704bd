import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import { isLeaseholdError } from '../../src/core/errors.js';
import { ForwardingLeaseStore } from '../../src/testing/forwarding-store.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import type {
  QueueingLeaseStore,
  StoreAcquireRequest,
  StoreQueuedOptions,
  StoreQueuedResult,
} from '../../src/core/store.js';
import { MemoryLeaseState, MemoryLeaseStore } from '../../src/stores/memory/store.js';
import { deferred } from '../support/faulty-store.js';

const OPTS = { timeoutMs: 1000, signal: new AbortController().signal };

/**
 * The memory store with the queueing capability added: `acquireQueued` runs the case's
 * handler, which decides when (and with which `validFrom`) the real store grants.
 */
class QueueingMemory extends ForwardingLeaseStore implements QueueingLeaseStore {
  calls = 0;
  constructor(
    readonly memory: MemoryLeaseStore,
    private readonly handler: (
      r: StoreAcquireRequest,
      o: StoreQueuedOptions,
      grant: (validFrom: number) => Promise<StoreQueuedResult>,
    ) => Promise<StoreQueuedResult>,
  ) {
    super(memory);
  }
  acquireQueued(r: StoreAcquireRequest, o: StoreQueuedOptions): Promise<StoreQueuedResult> {
    this.calls++;
    return this.handler(r, o, async (validFrom) => {
      const a = await this.memory.tryAcquire(r, o);
      return a.status === 'acquired' ? { ...a, validFrom } : a;
    });
  }
}

function setup(handler: ConstructorParameters<typeof QueueingMemory>[1]): {
  clock: ManualClock;
  store: QueueingMemory;
  client: LeaseClient;
} {
  const clock = new ManualClock();
  const memory = new MemoryLeaseStore({ clock, state: new MemoryLeaseState() });
  const store = new QueueingMemory(memory, handler);
  return { clock, store, client: new LeaseClient({ store, clock, ownerId: 'q' }) };
}

describe('LeaseClient.acquire on a store that keeps the queue (QueueingLeaseStore)', () => {
  it("hands a wait to the store and counts the lease's deadline from the store's validFrom", async () => {
    const headReached = deferred<void>();
    const { clock, store, client } = setup(async (_r, o, grant) => {
      await headReached.promise;
      return grant(o.now());
    });
    const pending = client.acquire('k', { ttl: 1000, wait: 5000, autoRenew: false });
    await clock.advance(700); // waiting in the queue
    headReached.resolve();
    const r = await pending;
    assert.equal(r.status, 'acquired');
    if (r.status !== 'acquired') return;
    assert.equal(store.calls, 1);
    // validFrom = 700, drift = ceil(1000 × 1%) + 2 = 12
    assert.equal(r.lease.deadline, 700 + 1000 - 12);
    assert.equal(r.waitedMs, 700);
    await r.lease.release();
  });

  it('passes the remaining wait, the round-trip bound, the poll interval and its own clock', async () => {
    let seen: StoreQueuedOptions | undefined;
    const { clock, client } = setup((_r, o, grant) => {
      seen = o;
      return grant(o.now());
    });
    const r = await client.acquire('k', { ttl: 1000, wait: '3s', autoRenew: false });
    assert.equal(r.status, 'acquired');
    assert.equal(seen?.timeoutMs, 3000);
    assert.equal(seen?.requestTimeoutMs, 1000 - 12, 'no round trip longer than the lease window');
    assert.equal(seen?.pollIntervalMs, 2000, 'the backstop poll of a push store');
    await clock.advance(42);
    assert.equal(seen?.now(), 42);
    if (r.status === 'acquired') await r.lease.release();
  });

  it('does not queue when wait is 0', async () => {
    const { store, client } = setup((_r, o, grant) => grant(o.now()));
    const r = await client.acquire('k', { ttl: 1000, autoRenew: false });
    assert.equal(r.status, 'acquired');
    assert.equal(store.calls, 0);
    if (r.status === 'acquired') await r.lease.release();
  });

  it('releases a grant that arrives after the caller aborted', async () => {
    const headReached = deferred<void>();
    let granted: StoreQueuedResult | undefined;
    const { store, client } = setup(async (_r, o, grant) => {
      await headReached.promise;
      granted = await grant(o.now());
      return granted;
    });
    const controller = new AbortController();
    const pending = client.acquire('k', { ttl: 1000, wait: 5000, signal: controller.signal });
    controller.abort();
    await assert.rejects(pending, (err: unknown) => isLeaseholdError(err, 'ERR_ABORTED'));
    headReached.resolve();
    for (
      let i = 0;
      i < 50 && (granted === undefined || (await store.memory.inspect('k', OPTS)).holder);
      i++
    )
      await new Promise((res) => setImmediate(res));
    assert.equal(granted?.status, 'acquired', 'the store did grant');
    assert.equal((await store.memory.inspect('k', OPTS)).holder, undefined, 'and it was released');
  });

  it('refuses a validFrom outside the call (ERR_PROTOCOL) and releases that grant', async () => {
    const { clock, store, client } = setup((_r, o, grant) => grant(o.now() + 5));
    await clock.advance(10);
    await assert.rejects(client.acquire('k', { ttl: 1000, wait: 5000 }), (err: unknown) =>
      isLeaseholdError(err, 'ERR_PROTOCOL'),
    );
    for (let i = 0; i < 50 && (await store.memory.inspect('k', OPTS)).holder !== undefined; i++)
      await new Promise((res) => setImmediate(res));
    assert.equal((await store.memory.inspect('k', OPTS)).holder, undefined);
  });

  it("answers unavailable, and releases, when the grant's validity ended before it arrived", async () => {
    const { clock, store, client } = setup(async (_r, o, grant) => {
      const validFrom = o.now();
      const answer = await grant(validFrom);
      await clock.advance(1000); // the answer takes longer than the lease's window
      return answer;
    });
    const r = await client.acquire('k', { ttl: 1000, wait: 5000 });
    assert.equal(r.status, 'unavailable');
    for (let i = 0; i < 50 && (await store.memory.inspect('k', OPTS)).holder !== undefined; i++)
      await new Promise((res) => setImmediate(res));
    assert.equal((await store.memory.inspect('k', OPTS)).holder, undefined);
  });

  it("returns the store's busy answer with its holder", async () => {
    const { client } = setup(() =>
      Promise.resolve({
        status: 'busy',
        holder: {
          ownerId: 'x',
          token: 7n,
          remainingMs: 300,
          leaseIdPrefix: 'abcd1234',
          value: undefined,
        },
        retryAfterMs: 300,
      }),
    );
    const r = await client.acquire('k', { ttl: 1000, wait: 5000 });
    assert.equal(r.status, 'busy');
    if (r.status === 'busy') assert.equal(r.holder.token, 7n);
  });
});
