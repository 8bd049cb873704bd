import type { CheckReport } from '../check/checker.js';
import type { HistoryEvent } from '../history/events.js';
import { acquireSetRecorded, acquireSlotRecorded, fencedAppend } from './group-steps.js';
import { CALM_LINK, lossyLink, type LinkProfile } from './network.js';
import type { GroupBug } from './planted-bugs.js';
import type { SeededRandom } from './random.js';
import { SimWorld, type SimWorker } from './world.js';

/** The workloads beyond one key: a semaphore, overlapping sets of keys, a key's lock-delay. */
export type GroupWorkload = 'semaphore' | 'sets' | 'lock-delay';

/** The group workloads, for CLI validation. */
export const GROUP_WORKLOADS: readonly GroupWorkload[] = ['semaphore', 'sets', 'lock-delay'];

const SET_KEYS = ['k0', 'k1', 'k2', 'k3', 'k4', 'k5'];

/** Options for one seed of a group workload. */
export interface GroupRunOptions {
  readonly workload: GroupWorkload;
  readonly seed: number;
  readonly bug?: GroupBug;
}

/** One seed of a group workload: the checker's verdict and what the seed did. */
export interface GroupRun {
  readonly workload: GroupWorkload;
  readonly seed: number;
  readonly history: readonly HistoryEvent[];
  readonly report: CheckReport;
  readonly faults: readonly string[];
  /** Slots taken, sets held whole, or lock-delays started by an expiry (per workload). */
  readonly holds: number;
}

/**
 * Runs one seed of a group workload; the same seed gives the same history. Every workload
 * has workers with real clients against the memory store over the seeded network, writes
 * fenced per slot or per key at the resource, and faults chosen by the seed (a lossy network,
 * freezes past the TTL, pauses before a write, crashes).
 * - `semaphore`: 3–8 workers take one slot of a semaphore of 1–4 slots (`acquireSlot`) and
 *   append to the slot's own resource with the slot's token.
 * - `sets`: 3–5 workers take random overlapping sets of 1–3 of 6 keys (`acquireAll`, sorted)
 *   and append to each key's resource with that key's token.
 * - `lock-delay`: 2–4 workers on one key with a lock-delay of 0.5–2 TTLs; holders that stop
 *   renewing, freezes and crashes end leases by expiry; a share of acquisitions skip the
 *   delay; client clocks that run fast or jump (the store's clock alone must decide).
 */
export async function runGroupSeed(options: GroupRunOptions): Promise<GroupRun> {
  const world = new SimWorld({
    seed: options.seed,
    fencing: true,
    ...(options.bug ? { bug: options.bug } : {}),
    link: CALM_LINK,
  });
  const plan = world.random.fork(`plan:${options.workload}`);
  const ttlMs = plan.int(5, 40) * 100;
  const durationMs = 10 * ttlMs;
  const faults: string[] = [];
  const lossy = plan.chance(0.4);
  const link: LinkProfile = lossy ? lossyLink(ttlMs, 0.03) : CALM_LINK;
  if (lossy) faults.push('lossy_network');
  const [low, high] =
    options.workload === 'semaphore' ? [3, 8] : options.workload === 'sets' ? [3, 5] : [2, 4];
  const workers = Array.from({ length: plan.int(low, high) }, (_, i) => {
    const w = world.addWorker(`w${i + 1}`, { pollIntervalMs: Math.max(50, Math.floor(ttlMs / 4)) });
    world.network.setProfile(w.name, 'store', link);
    return w;
  });
  injectFaults(world, plan, workers, { ttlMs, durationMs, faults });
  if (options.workload === 'lock-delay')
    injectClockFaults(world, plan, workers, durationMs, faults);
  world.meta({ source: 'leasehold-sim', scenario: options.workload, ttlMs });
  const pausers = new Set(workers.filter(() => plan.chance(0.35)).map((w) => w.name));
  const limit = plan.int(1, 4);
  const lockDelayMs = Math.floor(ttlMs * (0.5 + plan.next() * 1.5));
  let holds = 0;
  let values = 0;
  for (const w of workers) {
    const r = world.random.fork(`group-work:${w.name}`);
    const work = async (): Promise<void> => {
      await w.proc.sleep(r.int(0, Math.floor(ttlMs * 0.8)));
      if (pausers.has(w.name) && r.chance(0.4)) {
        const pauseMs = Math.floor(ttlMs * (0.3 + r.next() * 2.7));
        world.fault('pause', w.name, `${pauseMs}ms`);
        await w.proc.freeze(pauseMs);
      }
    };
    const waitMs = (): number => r.int(0, 2 * ttlMs);
    const step = async (): Promise<boolean> => {
      if (options.workload === 'semaphore') {
        const lease = await acquireSlotRecorded(world, w, 'pool', {
          limit,
          ttlMs,
          waitMs: waitMs(),
        });
        if (typeof lease === 'string') return false;
        holds++;
        await fencedAppend(world, w, lease.key, lease.token, `${w.name}#${++values}`, work);
        await world.release(w, lease);
        return true;
      }
      if (options.workload === 'sets') {
        const keys: string[] = [];
        for (let n = r.int(1, 3); keys.length < n;) {
          const k = r.pick(SET_KEYS);
          if (!keys.includes(k)) keys.push(k);
        }
        const set = await acquireSetRecorded(world, w, keys, { ttlMs, waitMs: waitMs() });
        if (typeof set === 'string') return false;
        holds++;
        let first = true;
        for (const lease of set.leases) {
          const before = first ? work : () => Promise.resolve();
          first = false;
          await fencedAppend(world, w, lease.key, lease.token, `${w.name}#${++values}`, before);
        }
        await set.release();
        return true;
      }
      const ignore = r.chance(0.2);
      const abandon = r.chance(0.3);
      const lease = await world.acquire(w, 'job', {
        ttlMs,
        waitMs: waitMs(),
        lockDelayMs,
        ...(ignore ? { ignoreLockDelay: true } : {}),
        // A holder that stops renewing and never releases: its lease ends by expiry.
        ...(abandon ? { autoRenew: false } : {}),
      });
      if (typeof lease === 'string') return false;
      await fencedAppend(world, w, 'result', lease.token, `${w.name}#${++values}`, work);
      if (!abandon) await world.release(w, lease);
      else await w.proc.sleep(ttlMs);
      return true;
    };
    const loop = async (): Promise<void> => {
      while (world.clock.now() < durationMs) {
        const held = await step();
        await w.proc.sleep(
          held ? r.int(0, Math.floor(ttlMs / 4)) : r.int(1, Math.floor(ttlMs / 2)),
        );
      }
    };
    // The client fails closed (throws ERR_CLOCK) when its clock goes backwards: the worker stops.
    loop().catch((err: unknown) => {
      world.fault('worker_stopped', w.name, String(err));
      w.proc.crash();
    });
  }
  await world.advance(durationMs + 4 * ttlMs);
  const { history, report } = world.finish();
  if (options.workload === 'lock-delay') holds = countDelayedEnds(history);
  return { workload: options.workload, seed: options.seed, history, report, faults, holds };
}

function injectFaults(
  world: SimWorld,
  plan: SeededRandom,
  workers: readonly SimWorker[],
  o: { ttlMs: number; durationMs: number; faults: string[] },
): void {
  if (plan.chance(0.3)) {
    const victim = plan.pick(workers);
    o.faults.push('crash');
    world.clock.setTimeout(
      () => {
        world.fault('crash', victim.name);
        victim.proc.crash();
      },
      plan.int(0, o.durationMs),
    );
  }
  if (plan.chance(0.3)) {
    const victim = plan.pick(workers);
    const len = Math.floor(o.ttlMs * (0.5 + plan.next() * 1.5));
    o.faults.push('freeze');
    world.clock.setTimeout(
      () => {
        if (victim.proc.crashed || victim.proc.frozen) return;
        world.fault('pause', victim.name, `${len}ms`);
        void victim.proc.freeze(len);
      },
      plan.int(0, o.durationMs),
    );
  }
}

/** Client clocks that run fast or jump ahead: a lock-delay must not shorten with them. */
function injectClockFaults(
  world: SimWorld,
  plan: SeededRandom,
  workers: readonly SimWorker[],
  durationMs: number,
  faults: string[],
): void {
  if (plan.chance(0.4)) {
    const victim = plan.pick(workers);
    const rate = plan.pick([1.5, 2, 3]);
    faults.push('client_clock_rate');
    world.fault('client_clock_rate', victim.name, `x${rate}`);
    victim.proc.setRate(rate);
  }
  if (plan.chance(0.3)) {
    const victim = plan.pick(workers);
    const jump = plan.int(1, 4) * 1000;
    faults.push('client_clock_jump');
    world.clock.setTimeout(
      () => {
        world.fault('client_clock_jump', victim.name, `${jump}ms`);
        victim.proc.jump(jump);
      },
      plan.int(0, durationMs),
    );
  }
}

/** Grants with a lock-delay that ended by expiry, not release: the delays the store kept. */
function countDelayedEnds(history: readonly HistoryEvent[]): number {
  const released = new Set<string>();
  for (const e of history)
    if (e.type === 'store' && e.action === 'released') released.add(`${e.lease}:${e.token}`);
  return history.filter(
    (e) =>
      e.type === 'store' &&
      e.action === 'grant' &&
      (e.lockDelayMs ?? 0) > 0 &&
      !released.has(`${e.lease}:${e.token}`),
  ).length;
}
