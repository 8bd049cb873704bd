import { CALM_LINK, lossyLink, type LinkProfile } from './network.js';
import { SimWorld } from './world.js';

/** Options for one seed of the claim workload. */
export interface ClaimRunOptions {
  readonly seed: number;
  /** New owners claim their token at the resource before they start (false: the control arm). */
  readonly claims: boolean;
}

/** What one seed of the claim workload did. */
export interface ClaimRun {
  readonly seed: number;
  readonly claims: boolean;
  /** The checker's verdict on the history (safety invariants only count here). */
  readonly valid: boolean;
  /** Writes the resource accepted below a token it had already accepted (invariant I1). */
  readonly staleWritesAccepted: number;
  /**
   * Writes the resource accepted with token t after a newer owner (token > t) had started its
   * work — before that owner's first write, so the mark had not seen the newer token: the
   * unfenced first write. Counted from the resource's own answers and the owners' start times.
   */
  readonly staleFirstWrites: number;
  /**
   * The same anomaly as the history checker sees it, from the history alone
   * (`figures.staleFirstWritesAccepted`): must equal `staleFirstWrites`.
   */
  readonly checkerStaleFirstWrites: number;
  /** I9 violations: writes applied below a token already claimed at the resource. */
  readonly i9Violations: number;
  readonly writesApplied: number;
  readonly staleWritesRejected: number;
  /** Claims answered stale_fence: an owner superseded before it started (it never wrote). */
  readonly claimsRefused: number;
  readonly faults: readonly string[];
}

/**
 * The claim workload (issue 42): 2–4 workers loop acquire → [claim] → work → (maybe a pause
 * past the TTL) → one blind write of their own value with their token → release, on one key
 * and one fenced resource. Blind: no read before the write, so nothing but a claim tells the
 * resource about a new owner before its first write. The seed picks the TTL, the network,
 * which workers pause and for how long. Same seed, same run.
 */
export async function runClaimSeed(options: ClaimRunOptions): Promise<ClaimRun> {
  const world = new SimWorld({ seed: options.seed, fencing: true, link: CALM_LINK });
  const plan = world.random.fork('claim-plan');
  const ttlMs = plan.int(5, 40) * 100;
  const workerCount = plan.int(2, 4);
  const durationMs = 10 * ttlMs;
  const faults: string[] = [];
  const lossy = plan.chance(0.4);
  const link: LinkProfile = lossy ? lossyLink(ttlMs, 0) : CALM_LINK;
  if (lossy) faults.push('lossy_network');
  world.meta({ source: 'leasehold-sim', scenario: 'claims', ttlMs });
  const starts: { token: bigint; t: number }[] = [];
  let claimsRefused = 0;
  const workers = Array.from({ length: workerCount }, (_, i) => {
    const w = world.addWorker(`w${i + 1}`, { pollIntervalMs: Math.max(50, Math.floor(ttlMs / 4)) });
    world.network.setProfile(w.name, 'store', link);
    return w;
  });
  for (const w of workers) {
    const r = world.random.fork(`claim-work:${w.name}`);
    const pauser = plan.chance(0.5);
    if (pauser) faults.push(`pause:${w.name}`);
    const loop = async (): Promise<void> => {
      while (world.clock.now() < durationMs) {
        const got = await world.acquire(w, 'job', {
          ttlMs,
          waitMs: r.int(0, 2 * ttlMs),
        });
        if (typeof got === 'string') {
          await w.proc.sleep(r.int(1, Math.floor(ttlMs / 2)));
          continue;
        }
        if (options.claims && (await world.claim(w, 'result', got.token)) === 'stale_fence') {
          claimsRefused++;
          await world.release(w, got);
          continue;
        }
        starts.push({ token: got.token, t: world.clock.now() });
        await w.proc.sleep(r.int(0, Math.floor(ttlMs * 0.8)));
        if (pauser && r.chance(0.5)) {
          const pauseMs = Math.floor(ttlMs * (0.5 + r.next() * 2));
          world.fault('pause', w.name, `${pauseMs}ms`);
          await w.proc.freeze(pauseMs);
        }
        const value = `${w.name}:${got.token}`;
        await world.write(w, 'result', got.token, [value]);
        await world.release(w, got);
        await w.proc.sleep(r.int(0, Math.floor(ttlMs / 4)));
      }
    };
    loop().catch((err: unknown) => {
      world.fault('worker_stopped', w.name, String(err));
      w.proc.crash();
    });
  }
  await world.advance(durationMs + 4 * ttlMs);
  const { history, report } = world.finish();
  let writesApplied = 0;
  let staleFirstWrites = 0;
  for (const e of history) {
    if (e.type !== 'resource' || e.action !== 'applied') continue;
    writesApplied++;
    const token = BigInt(e.token);
    if (starts.some((s) => s.token > token && s.t <= e.t)) staleFirstWrites++;
  }
  const f = report.figures;
  return {
    seed: options.seed,
    claims: options.claims,
    valid: report.valid,
    staleWritesAccepted: f.staleWritesAccepted,
    staleFirstWrites,
    checkerStaleFirstWrites: f.staleFirstWritesAccepted,
    i9Violations: report.invariants.I9.violations.length,
    writesApplied,
    staleWritesRejected: f.staleWritesRejected,
    claimsRefused,
    faults,
  };
}

/** The counts of one seed that a sweep adds up. */
type ClaimCounts = Pick<
  ClaimRun,
  | 'staleWritesAccepted'
  | 'staleFirstWrites'
  | 'checkerStaleFirstWrites'
  | 'i9Violations'
  | 'writesApplied'
  | 'staleWritesRejected'
  | 'claimsRefused'
>;

/** Figures of a sweep of the claim workload: the seeds' counts added up. */
export interface ClaimSweepResult extends ClaimCounts {
  readonly runs: number;
  readonly claims: boolean;
  /** Runs with a stale write accepted, first writes included. */
  readonly anomalousRuns: number;
  /** Seeds the checker found invalid, or (with claims) that accepted a stale first write. */
  readonly failingSeeds: readonly number[];
  readonly wallMs: number;
}

/** Runs the claim workload over `count` seeds from `from` and adds up the figures. */
export async function sweepClaimSeeds(options: {
  readonly from?: number;
  readonly count: number;
  readonly claims: boolean;
  readonly timeLimitMs?: number;
}): Promise<ClaimSweepResult> {
  const started = performance.now();
  const from = options.from ?? 1;
  const sum = {
    runs: 0,
    staleWritesAccepted: 0,
    staleFirstWrites: 0,
    checkerStaleFirstWrites: 0,
    i9Violations: 0,
    writesApplied: 0,
    staleWritesRejected: 0,
    claimsRefused: 0,
    anomalousRuns: 0,
  };
  const failingSeeds: number[] = [];
  for (let seed = from; seed < from + options.count; seed++) {
    if (options.timeLimitMs !== undefined && performance.now() - started > options.timeLimitMs)
      break;
    const r = await runClaimSeed({ seed, claims: options.claims });
    sum.runs++;
    sum.staleWritesAccepted += r.staleWritesAccepted;
    sum.staleFirstWrites += r.staleFirstWrites;
    sum.checkerStaleFirstWrites += r.checkerStaleFirstWrites;
    sum.i9Violations += r.i9Violations;
    sum.writesApplied += r.writesApplied;
    sum.staleWritesRejected += r.staleWritesRejected;
    sum.claimsRefused += r.claimsRefused;
    const anomalous =
      r.staleWritesAccepted > 0 || r.staleFirstWrites > 0 || r.checkerStaleFirstWrites > 0;
    if (anomalous) sum.anomalousRuns++;
    if (!r.valid || (options.claims && anomalous)) failingSeeds.push(seed);
  }
  return { ...sum, claims: options.claims, failingSeeds, wallMs: performance.now() - started };
}

/** The figures line of a claim sweep. */
export function formatClaimSweep(label: string, r: ClaimSweepResult): string {
  return `${label}: runs=${r.runs} claims=${r.claims ? 'on' : 'off'} writes_applied=${r.writesApplied} stale_writes_accepted=${r.staleWritesAccepted} stale_first_writes_accepted=${r.staleFirstWrites} checker_stale_first_writes=${r.checkerStaleFirstWrites} i9_violations=${r.i9Violations} stale_writes_rejected=${r.staleWritesRejected} claims_refused=${r.claimsRefused} anomalous_runs=${r.anomalousRuns} failing_seeds=${r.failingSeeds.length} wall=${Math.round(r.wallMs)}ms`;
}
