import type { CheckReport } from '../check/checker.js';
import type { HistoryEvent } from '../history/events.js';
import { CALM_LINK, type LinkProfile } from './network.js';
import type { PlantedBug } from './planted-bugs.js';
import { SeededRandom } from './random.js';
import { SimWorld, type SimWorker } from './world.js';

/** Options for one seed of the random lock-set workload. */
export interface RandomRunOptions {
  readonly seed: number;
  /** The resource checks tokens (true), or this is the unfenced control arm (false). */
  readonly fencing: boolean;
  readonly bug?: PlantedBug;
  /**
   * The store fails over 1–3 times (it loses its last 1–3 grants and comes back as a new
   * incarnation) and detects it. Implied by the planted bug `miss_failover`, which leaves the
   * detection out.
   */
  readonly failover?: boolean;
}

/** One simulated run: its history, the checker's verdict and what faults the seed chose. */
export interface SimRun {
  readonly seed: number;
  readonly fencing: boolean;
  readonly scenario: string;
  readonly history: readonly HistoryEvent[];
  readonly text: string;
  readonly report: CheckReport;
  readonly faults: readonly string[];
  /** Concurrent lock-set tasks per worker (one client each): more than one makes hand-offs. */
  readonly tasks: readonly number[];
  /** With failovers: grants whose token the store had granted before (0 with detection). */
  readonly reissuedTokens: number;
  /** With failovers: how many times the store raised its epoch. */
  readonly epochRaises: number;
}

/** I5's search budget per key in runs with failovers. */
const FAILOVER_I5_STEPS = 10_000;

/** Share of seeds whose workers run several tasks on one client (the hand-off path). */
const POOLED_SHARE = 0.4;

/**
 * Runs the random lock-set workload (Jepsen's W-lockset shape) for one seed: 2–4 workers
 * acquire one key, read the resource, work, write read+own value with their token, release.
 * The seed picks the TTL, the network's misbehaviour (delay, drop, duplicate, lost replies),
 * pauses between check and write, timed freezes, crashes, client clock jumps and rate skew,
 * store clock jumps and delayed writes. Same seed, same history, byte for byte.
 *
 * On a share of seeds ({@link POOLED_SHARE}) a worker runs 2–3 tasks on its one client, so a
 * release finds a waiter of the same client and the key is handed off (`releaseAndAcquire`);
 * the seed also picks the client's `maxHandOffRun`, and on half of those seeds
 * `localSuccessors` (the key passed locally under one store lease, decision 007). Those
 * choices come from their own streams, named by the seed: the other seeds replay exactly
 * as before hand-off existed.
 */
export async function runRandomSeed(options: RandomRunOptions): Promise<SimRun> {
  const failover = options.failover === true || options.bug === 'miss_failover';
  const world = new SimWorld({
    seed: options.seed,
    fencing: options.fencing,
    ...(options.bug ? { bug: options.bug } : {}),
    ...(failover ? { failover: { detect: options.bug !== 'miss_failover' } } : {}),
    link: CALM_LINK,
  });
  const plan = world.random.fork('plan');
  const ttlMs = plan.int(5, 40) * 100;
  const workerCount = plan.int(2, 4);
  const durationMs = 10 * ttlMs;
  const faults: string[] = [];
  const lossy = plan.chance(0.5);
  const link: LinkProfile = lossy
    ? {
        minDelayMs: 1,
        maxDelayMs: Math.max(2, Math.floor(ttlMs / 10)),
        dropRequest: 0.03,
        dropReply: 0.05,
        duplicate: 0.05,
      }
    : CALM_LINK;
  if (lossy) faults.push('lossy_network');

  const shape = new SeededRandom(`tasks:${options.seed}`);
  const pooled = shape.chance(POOLED_SHARE);
  const tasks = Array.from({ length: workerCount }, (_, i) =>
    pooled ? shape.int(i === 0 ? 2 : 1, 3) : 1,
  );
  const maxHandOffRun = pooled ? shape.pick([1, 2, 16]) : undefined;
  // Half of the pooled seeds pass the key locally under one store lease (decision 007).
  const local = new SeededRandom(`local:${options.seed}`);
  const localSuccessors = pooled && local.chance(0.5) ? local.pick([1, 3, 8]) : undefined;
  const workers: SimWorker[] = [];
  for (let i = 0; i < workerCount; i++) {
    const w = world.addWorker(`w${i + 1}`, {
      pollIntervalMs: Math.max(50, Math.floor(ttlMs / 4)),
      ...(maxHandOffRun === undefined ? {} : { maxHandOffRun }),
      ...(localSuccessors === undefined ? {} : { localSuccessors }),
    });
    world.network.setProfile(w.name, 'store', link);
    workers.push(w);
  }
  const pausers = new Set<string>();
  for (const w of workers) if (plan.chance(0.35)) pausers.add(w.name);
  if (pausers.size > 0) faults.push('pause_before_write');
  const checkers = new Set<string>();
  for (const w of workers) if (plan.chance(0.5)) checkers.add(w.name);

  const at = (fn: () => void, when: number): void => {
    world.clock.setTimeout(fn, when);
  };
  if (plan.chance(0.25)) {
    const victim = plan.pick(workers);
    const when = plan.int(0, durationMs);
    faults.push('crash');
    at(() => {
      world.fault('crash', victim.name);
      victim.proc.crash();
    }, when);
  }
  if (plan.chance(0.2)) {
    const victim = plan.pick(workers);
    const when = plan.int(0, durationMs);
    const len = Math.floor(ttlMs * (0.5 + plan.next() * 1.5));
    faults.push('freeze');
    at(() => {
      if (victim.proc.crashed || victim.proc.frozen) return;
      world.fault('pause', victim.name, `${len}ms`);
      void victim.proc.freeze(len);
    }, when);
  }
  if (plan.chance(0.1)) {
    const victim = plan.pick(workers);
    const rate = plan.pick([0.5, 0.9, 1.005, 1.5, 2]);
    faults.push('client_clock_rate');
    world.fault('client_clock_rate', victim.name, `x${rate}`);
    victim.proc.setRate(rate);
  }
  if (plan.chance(0.1)) {
    const victim = plan.pick(workers);
    const when = plan.int(0, durationMs);
    const jump = plan.chance(0.8) ? Math.floor(ttlMs * (0.5 + plan.next() * 1.5)) : -1000;
    faults.push('client_clock_jump');
    at(() => {
      world.fault('client_clock_jump', victim.name, `${jump}ms`);
      victim.proc.jump(jump);
    }, when);
  }
  if (plan.chance(0.05)) {
    const when = plan.int(0, durationMs);
    faults.push('store_clock_jump');
    at(() => {
      world.fault('store_clock_jump', undefined, `+${2 * ttlMs}ms`);
      world.storeProc.jump(2 * ttlMs);
    }, when);
  }
  if (plan.chance(0.2)) {
    const victim = plan.pick(workers);
    const extra = Math.floor(ttlMs * (1 + plan.next()));
    faults.push('delayed_write');
    world.network.delayNext(victim.name, 'write', extra);
  }
  if (failover) scheduleFailovers(world, options.seed, durationMs, faults);
  const calmRun = !lossy && faults.every((f) => f === 'crash');
  world.meta({
    source: 'leasehold-sim',
    scenario: 'random',
    ttlMs,
    ...(calmRun ? { livenessBoundMs: 1000 } : {}),
  });

  const end = durationMs;
  // Every worker's first task, then the extra ones (so a seed with one task each draws its
  // streams exactly as before extra tasks existed).
  const runs: { w: SimWorker; label: string }[] = workers.map((w) => ({ w, label: w.name }));
  workers.forEach((w, i) => {
    for (let k = 2; k <= tasks[i]!; k++) runs.push({ w, label: `${w.name}#${k}` });
  });
  for (const { w, label } of runs) {
    const r = world.random.fork(`work:${label}`);
    const loop = async (): Promise<void> => {
      while (world.clock.now() < end) {
        const pause = pausers.has(w.name) && r.chance(0.4);
        const pauseMs = Math.floor(ttlMs * (0.3 + r.next() * 2.7));
        const outcome = await world.locksetOnce(w, {
          key: 'job',
          resource: 'result',
          ttlMs,
          waitMs: r.int(0, 2 * ttlMs),
          workMs: r.int(0, Math.floor(ttlMs * 0.8)),
          checkBeforeWrite: checkers.has(w.name),
          ...(pause
            ? {
                beforeWrite: () => {
                  world.fault('pause', w.name, `${pauseMs}ms`);
                  return w.proc.freeze(pauseMs);
                },
              }
            : {}),
        });
        await w.proc.sleep(
          outcome.status === 'not_acquired'
            ? r.int(1, Math.floor(ttlMs / 2))
            : r.int(0, Math.floor(ttlMs / 4)),
        );
      }
    };
    // The client fails closed (throws ERR_CLOCK) when its clock goes backwards: the worker stops.
    loop().catch((err: unknown) => {
      world.fault('worker_stopped', w.name, String(err));
      w.proc.crash();
    });
  }
  await world.advance(end + 4 * ttlMs);
  // A store that lost grants is not a linearizable lease (I5 is expected to fail): a smaller
  // search budget says so (or `unknown`) in a tenth of the time; I1 and I2 decide these runs.
  const { history, report, text } = world.finish(
    failover ? { linearizability: { maxStepsPerKey: FAILOVER_I5_STEPS } } : undefined,
  );
  return {
    seed: options.seed,
    fencing: options.fencing,
    scenario: 'random',
    history,
    report,
    text,
    faults,
    tasks,
    reissuedTokens: world.failoverStore?.reissuedTokens ?? 0,
    epochRaises: world.failoverStore?.epochRaises ?? 0,
  };
}

/**
 * 1–3 failovers at times the seed picks (from a stream of its own, so the rest of the seed's
 * choices are those of the run without failovers), each losing the store's last 1–3 grants.
 */
function scheduleFailovers(
  world: SimWorld,
  seed: number,
  durationMs: number,
  faults: string[],
): void {
  const store = world.failoverStore;
  if (store === undefined) return;
  const r = new SeededRandom(`failover:${seed}`);
  const count = r.int(1, 3);
  faults.push('failover');
  for (let i = 0; i < count; i++) {
    const when = r.int(0, durationMs);
    const k = r.int(1, 3);
    world.clock.setTimeout(() => {
      const done = store.failover(k);
      world.fault(
        'failover',
        undefined,
        `lost ${done.lostGrants} grants; incarnation ${done.incarnation}`,
      );
    }, when);
  }
}
