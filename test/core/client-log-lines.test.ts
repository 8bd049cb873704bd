import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { LeaseClient } from '../../src/core/client.js';
import type { Lease } from '../../src/core/lease.js';
import { LeaseholdError } from '../../src/core/runtime/errors.js';
import type {
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreLeaseRef,
  StoreRenewResult,
  StoreRequestOptions,
} from '../../src/core/store.js';
import { MemoryLeaseStore } from '../../src/stores/memory/store.js';
import { ForwardingLeaseStore } from '../../src/testing/forwarding-store.js';

/** The memory store, told how to answer: as itself, unreachable, or with every lease gone. */
class SwitchedStore extends ForwardingLeaseStore {
  mode: 'ok' | 'down' | 'lost' = 'ok';
  override tryAcquire(r: StoreAcquireRequest, o: StoreRequestOptions): Promise<StoreAcquireResult> {
    if (this.mode === 'down') return Promise.reject(down());
    return super.tryAcquire(r, o);
  }
  override renew(
    lease: StoreLeaseRef & { ttlMs: number },
    o: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    if (this.mode === 'down') return Promise.reject(down());
    if (this.mode === 'lost') return Promise.resolve({ status: 'lost' });
    return super.renew(lease, o);
  }
}

const down = (): LeaseholdError =>
  new LeaseholdError('ERR_UNAVAILABLE', 'connect ECONNREFUSED 127.0.0.1:5432');

/** A pino logger whose JSON lines the test reads back. */
function capturedLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n'))
        if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { lines, logger: pino({ level: 'debug' }, sink) };
}

describe('the client log lines name the owner, the key, the lease and its token', () => {
  it('a failed renewal, a lost lease and an unavailable store', async () => {
    const store = new SwitchedStore(new MemoryLeaseStore());
    const { lines, logger } = capturedLogger();
    const client = new LeaseClient({ store, ownerId: 'billing-7', logger });
    try {
      const r = await client.acquire('jobs/nightly', { ttl: '30s', autoRenew: false });
      assert.equal(r.status, 'acquired');
      const lease = (r as { lease: Lease }).lease;
      const token = lease.token.toString();
      assert.match(token, /^\d+$/);
      const prefix = lease.leaseId.slice(0, 8);
      const named = { ownerId: 'billing-7', key: 'jobs/nightly', lease: prefix, token };
      const pick = (l: Record<string, unknown> | undefined) => ({
        ownerId: l?.['ownerId'],
        key: l?.['key'],
        lease: l?.['lease'],
        token: l?.['token'],
      });

      store.mode = 'down';
      const failed = await lease.renew();
      assert.notEqual(failed.status, 'renewed');
      const renewFailed = lines.find(
        (l) => l['msg'] === 'lease renewal failed; retrying until the local deadline',
      );
      assert.deepEqual(pick(renewFailed), named);
      assert.equal(renewFailed?.['level'], 40);
      assert.match(String(renewFailed?.['err']), /ECONNREFUSED/);

      store.mode = 'lost';
      assert.equal((await lease.renew()).status, 'lost');
      const lost = lines.find((l) => l['msg'] === 'lease lost');
      assert.deepEqual(pick(lost), named);
      assert.equal(typeof lost?.['reason'], 'string');
      // The whole lease id never reaches a log line: it is the lease's credential at the store.
      for (const l of lines) assert.ok(!JSON.stringify(l).includes(lease.leaseId));

      store.mode = 'down';
      const again = await client.acquire('jobs/hourly', { ttl: '30s', autoRenew: false });
      assert.equal(again.status, 'unavailable');
      const unavailable = lines.find((l) => l['msg'] === 'lease store unavailable');
      assert.equal(unavailable?.['ownerId'], 'billing-7');
      assert.equal(unavailable?.['key'], 'jobs/hourly');
      assert.match(String(unavailable?.['err']), /ECONNREFUSED/);
    } finally {
      store.mode = 'ok';
      await client.close();
    }
  });
});
