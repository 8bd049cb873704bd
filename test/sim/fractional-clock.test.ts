import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Clock, TimerHandle } from '../../src/core/runtime/clock.js';
import { LeaseClient } from '../../src/core/client.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { MemoryLeaseStore } from '../../src/stores/memory/store.js';

// Simulated processes whose clock runs at another rate (0.9, 1.005, 1.5 …) read fractional
// milliseconds. Seed 1354 of the random workload hung a sweep for good: a lease's renewal
// came due at local 366.6666666666667, and `deadline − (deadline − now)` rounded to
// 366.66666666666663, below the renewal instant — so the timer neither renewed nor waited,
// and re-armed at 0 ms forever, never letting virtual time move.

/** A virtual clock that refuses to arm more than `limit` timers at one instant (a spin). */
class SpinGuardClock extends ManualClock {
  private lastAt = Number.NaN;
  private armedHere = 0;

  constructor(private readonly limit: number) {
    super({ startMs: 100 });
  }

  override setTimeout(callback: () => void, ms: number): TimerHandle {
    if (this.now() === this.lastAt) {
      if (++this.armedHere > this.limit)
        throw new Error(`more than ${this.limit} timers armed at virtual time ${this.now()}`);
    } else {
      this.lastAt = this.now();
      this.armedHere = 0;
    }
    return super.setTimeout(callback, ms);
  }
}

describe('leases on a clock with fractional readings', () => {
  it('renew when the renewal comes due at a reading where deadline − (deadline − now) rounds below it', async () => {
    const virtual = new SpinGuardClock(1000);
    // The client's clock reads 2/3 ms ahead of the store's, as a rate-skewed process does.
    const offset = 2 / 3;
    const clock: Clock = {
      now: () => virtual.now() + offset,
      wallNow: () => virtual.wallNow(),
      setTimeout: (callback, ms) => virtual.setTimeout(callback, ms),
      clearTimeout: (handle) => virtual.clearTimeout(handle),
    };
    const client = new LeaseClient({
      store: new MemoryLeaseStore({ clock: virtual }),
      clock,
      ownerId: 'A',
    });
    const got = await client.acquire('k', { ttl: 800, renewEvery: 266 });
    assert.equal(got.status, 'acquired');
    const lease = got.lease;
    // The instants of seed 1354: renewal due at 366.6666666666667, deadline 890.6666666666666.
    assert.equal(clock.now() + 266, 366.6666666666667);
    assert.ok(lease.deadline - (lease.deadline - 366.6666666666667) < 366.6666666666667);
    let renewed = 0;
    client.on('renewed', () => renewed++);
    await virtual.advance(3000);
    assert.ok(renewed >= 10, `renewed ${renewed} times in 3 s (every 266 ms)`);
    assert.equal(lease.isValid(), true);
    await lease.release();
    await client.close();
  });
});
