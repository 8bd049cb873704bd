// The setup every many-leases bench shares: one client takes its leases spread over one
// renewal interval, so that their renewals fall due spread over the interval too.
import type { Lease } from '../src/core/lease.js';

/** The leases' TTL in the many-leases benches. */
export const TTL_MS = 10_000;
/** Their renewal interval: the client's default, a third of the TTL. */
export const EVERY_MS = Math.floor(TTL_MS / 3);

/** What {@link acquirePaced} calls: a LeaseClient of this build or of another one. */
export interface AcquiringClient {
  acquire(
    key: string,
    options: { ttl: number; renewEvery: number },
  ): Promise<{ status: 'acquired'; lease: Lease } | { status: string }>;
}

/**
 * Acquires `leases` keys under `prefix` (`<prefix>/<i>`), paced evenly over one renewal
 * interval, into `held` as they are granted (so that the caller releases those it got if one
 * is not granted: then this throws).
 */
export async function acquirePaced(
  client: AcquiringClient,
  prefix: string,
  leases: number,
  held: Lease[],
): Promise<void> {
  const spacing = EVERY_MS / leases;
  const start = performance.now();
  for (let i = 0; i < leases; i++) {
    const r = await client.acquire(`${prefix}/${i}`, { ttl: TTL_MS, renewEvery: EVERY_MS });
    if (r.status !== 'acquired' || !('lease' in r)) throw new Error(`acquire ${i}: ${r.status}`);
    held.push(r.lease);
    const wait = start + (i + 1) * spacing - performance.now();
    // Behind schedule (a slow store) it still yields to timers: acquisitions that answer
    // within a microtask would otherwise run as one task for as long as they take, and the
    // first leases expired before their renewal timers could fire (seen on a loaded
    // machine: 763 of 10,000 leases lost on SQLite, whose grants wait for an fsync).
    await new Promise((res) => (wait > 0 ? setTimeout(res, wait) : setImmediate(res)));
  }
}
