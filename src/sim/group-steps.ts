import type { Lease } from '../core/lease.js';
import type { SimWorker, SimWorld } from './world.js';

// The semaphore and set steps of the simulation, recorded in the history the checker reads:
// a slot acquisition names its limit (I10), the members of a set taken as one name their set
// (I11). Both run the client's own code (`acquireSlot`, `acquireAll`); the planted bugs
// `slot_limit_off_by_one` and `non_atomic_set` change only what the harness asks for.

/** A set of keys a worker holds as one, and how to let it go (recorded per member). */
export interface HeldSet {
  readonly leases: readonly Lease[];
  /** False once any member's local deadline passed or it was lost. */
  isValid(): boolean;
  release(): Promise<void>;
}

/** Takes one slot of semaphore `name` through the worker's client, recording it. */
export async function acquireSlotRecorded(
  world: SimWorld,
  worker: SimWorker,
  name: string,
  opts: { limit: number; ttlMs: number; waitMs: number },
): Promise<Lease | 'busy' | 'unavailable'> {
  const op = world.history.newOp('a');
  const base = { type: 'acquire', proc: worker.name, op, limit: opts.limit } as const;
  world.history.record({
    ...base,
    phase: 'invoke',
    t: world.clock.now(),
    key: name,
    ttlMs: opts.ttlMs,
  });
  // The planted off-by-one: the search runs over one slot more than the limit.
  const asked = world.options.bug === 'slot_limit_off_by_one' ? opts.limit + 1 : opts.limit;
  const r = await worker.client.acquireSlot(name, {
    limit: asked,
    ttl: opts.ttlMs,
    wait: opts.waitMs,
  });
  if (r.status !== 'acquired') {
    world.history.record({ ...base, phase: r.status, t: world.clock.now(), key: name });
    return r.status;
  }
  recordGranted(world, worker, op, r.lease, { limit: opts.limit });
  return r.lease;
}

/**
 * Takes every key of `keys` as one set through the worker's client (`acquireAll`), recording
 * each member's acquisition with the set's label and keys. A set whose member is already lost
 * when the call answers is released at once and not counted as held.
 */
export async function acquireSetRecorded(
  world: SimWorld,
  worker: SimWorker,
  keys: readonly string[],
  opts: { ttlMs: number; waitMs: number },
): Promise<HeldSet | 'busy' | 'timeout' | 'unavailable' | 'lost'> {
  const t0 = world.clock.now();
  const setKeys = [...keys].sort();
  let held: HeldSet;
  if (world.options.bug === 'non_atomic_set') {
    const got = await takeWhatIsFree(worker, setKeys, opts);
    if (got.length === 0) return 'busy';
    held = {
      leases: got,
      isValid: () => got.every((l) => l.isValid()),
      release: async () => {
        for (const l of [...got].reverse()) await world.release(worker, l);
      },
    };
  } else {
    const r = await worker.client.acquireAll(setKeys, { ttl: opts.ttlMs, wait: opts.waitMs });
    if (r.status !== 'acquired') return r.status;
    const set = r.leases;
    if (!set.isValid()) {
      await set.release();
      return 'lost';
    }
    held = {
      leases: [...set.leases.values()],
      isValid: () => set.isValid(),
      release: () => releaseSetRecorded(world, worker, set.keys, set.leases, () => set.release()),
    };
  }
  const label = world.history.newOp('S');
  for (const lease of held.leases) {
    const op = world.history.newOp('a');
    world.history.record({
      type: 'acquire',
      phase: 'invoke',
      t: t0,
      proc: worker.name,
      op,
      key: lease.key,
      ttlMs: opts.ttlMs,
    });
    recordGranted(world, worker, op, lease, { set: label, setKeys });
  }
  return held;
}

/** The planted `non_atomic_set`: each key in turn, keeping what it got when one stays busy. */
async function takeWhatIsFree(
  worker: SimWorker,
  keys: readonly string[],
  opts: { ttlMs: number; waitMs: number },
): Promise<Lease[]> {
  const until = worker.proc.now() + opts.waitMs;
  const got: Lease[] = [];
  for (const key of keys) {
    const wait = Math.max(0, Math.ceil(until - worker.proc.now()));
    const r = await worker.client.acquire(key, { ttl: opts.ttlMs, wait });
    if (r.status === 'acquired') got.push(r.lease);
  }
  return got;
}

async function releaseSetRecorded(
  world: SimWorld,
  worker: SimWorker,
  keys: readonly string[],
  leases: ReadonlyMap<string, Lease>,
  release: () => Promise<
    { status: 'released' } | { status: 'partial'; results: ReadonlyMap<string, { status: string }> }
  >,
): Promise<void> {
  const ops = keys.map((key) => {
    const lease = leases.get(key)!;
    const base = {
      type: 'release',
      proc: worker.name,
      op: world.history.newOp('l'),
      key,
      token: lease.token.toString(),
      lease: world.labels.of(lease.leaseId),
    } as const;
    world.history.record({ ...base, phase: 'invoke', t: world.clock.now() });
    return base;
  });
  const r = await release();
  for (const base of ops) {
    const status = r.status === 'released' ? 'released' : r.results.get(base.key)?.status;
    const phase = status === 'released' || status === 'not_owner' ? status : 'unavailable';
    world.history.record({ ...base, phase, t: world.clock.now() });
  }
}

function recordGranted(
  world: SimWorld,
  worker: SimWorker,
  op: string,
  lease: Lease,
  extra: { limit?: number; set?: string; setKeys?: readonly string[] },
): void {
  world.history.record({
    type: 'acquire',
    phase: 'ok',
    t: world.clock.now(),
    proc: worker.name,
    op,
    key: lease.key,
    token: lease.token.toString(),
    lease: world.labels.of(lease.leaseId),
    ttlMs: lease.ttlMs,
    deadline: worker.proc.toVirtual(lease.deadline),
    ...extra,
  });
}

/**
 * Reads `scope` at the resource, runs `before` (work, a pause), then writes what it read
 * plus one value of its own with `token` (the lock-set shape: a lost write shows in I6).
 */
export async function fencedAppend(
  world: SimWorld,
  worker: SimWorker,
  scope: string,
  token: bigint,
  value: string,
  before: () => Promise<void>,
): Promise<'applied' | 'duplicate' | 'stale_fence'> {
  const snapshot = await world.read(worker, scope, token);
  await before();
  return world.write(worker, scope, token, [...snapshot.values, value], value);
}
