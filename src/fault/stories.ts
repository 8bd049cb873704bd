import { setTimeout as sleep } from 'node:timers/promises';
import type { CheckReport } from '../check/checker.js';
import type { HistoryEvent } from '../history/events.js';
import { sharedNow } from './protocol.js';
import { RealHarness, type RealHarnessOptions } from './harness.js';

/** Options for {@link runRealPauseStory}. */
export interface RealPauseOptions extends RealHarnessOptions {
  readonly ttlMs: number;
  readonly renewEveryMs: number;
  /** How long A is stopped (SIGSTOP … SIGCONT); at least until B has written. */
  readonly pauseMs: number;
  /** When A checks its lease and is stopped, after acquiring. */
  readonly freezeAtMs: number;
  readonly fencing: boolean;
  /** The lease key and resource scope (unique per run when several share a store). */
  readonly key: string;
  /** Called with each step as it happens (the demo prints them). */
  readonly onStep?: (step: RealStep) => void;
}

/** One step of the real story, in ms since A acquired. */
export interface RealStep {
  readonly t: number;
  readonly actor: 'Worker A' | 'Worker B' | 'Lock' | 'Storage';
  readonly text: string;
}

/** What the real pause story produced. */
export interface RealPauseResult {
  readonly steps: readonly RealStep[];
  readonly aToken: string;
  readonly bToken: string | undefined;
  /** A's late write: `applied`, `stale_fence` (or `skipped` if A saw the loss before writing). */
  readonly aWrite: string;
  readonly bWrite: string | undefined;
  /** After resuming, did A's library already know the lease was gone? */
  readonly aValidAfterResume: boolean;
  /** F23: A's release after expiry. */
  readonly aRelease: string;
  /** F24: A's renew after expiry. */
  readonly aRenew: string;
  /** B's lease was still valid after A's late release and renew (I7). */
  readonly bValidAfterA: boolean;
  /** Store-time gap from A's last renewal to B's grant (ms), when the store reports times. */
  readonly takeoverMs: number | undefined;
  readonly history: readonly HistoryEvent[];
  readonly report: CheckReport;
}

/**
 * F1 with real processes (and F23/F24 after it): worker A takes the lease, checks it and is
 * about to write when the harness SIGSTOPs it; B waits for the lease, takes it when A's
 * expires at the store, and writes; the harness SIGCONTs A, whose write goes out with its old
 * token. Then A releases and renews its expired lease (both must fail and leave B alone).
 */
export async function runRealPauseStory(options: RealPauseOptions): Promise<RealPauseResult> {
  const h = new RealHarness(options);
  h.meta({
    scenario: 'F1',
    ttlMs: options.ttlMs,
  });
  const steps: RealStep[] = [];
  let t0 = sharedNow();
  const step = (actor: RealStep['actor'], text: string): void => {
    const s = { t: sharedNow() - t0, actor, text };
    steps.push(s);
    options.onStep?.(s);
  };
  try {
    const [a, b] = await Promise.all([h.spawn('A'), h.spawn('B')]);
    const key = options.key;
    t0 = sharedNow();
    const ga = await h.acquireGranted(a, key, {
      ttlMs: options.ttlMs,
      waitMs: 0,
      renewEveryMs: options.renewEveryMs,
    });
    if (ga.status !== 'ok') throw new Error(`A could not acquire ${key}: ${ga.status}`);
    step('Worker A', `Takes the lease with fencing token ${ga.token}`);
    // B starts waiting now; it gets the lease only once A's has expired at the store.
    const bAcquire = h.acquire(b, key, {
      ttlMs: options.ttlMs,
      waitMs: options.pauseMs + 4 * options.ttlMs,
      renewEveryMs: options.renewEveryMs,
    });
    await sleep(options.freezeAtMs);
    const checked = a.next('checked');
    const aWrite = h.write(a, {
      scope: key,
      value: "A's result",
      fenced: options.fencing,
      check: true,
      token: ga.token!,
      stopAfterCheck: true,
    });
    await checked;
    // A stops itself with SIGSTOP right after its check; wait until the kernel shows it stopped.
    for (let i = 0; !a.isStopped(); i++) {
      if (i > 500) throw new Error('worker A did not stop after its check');
      await sleep(5);
    }
    const stoppedAt = sharedNow();
    h.fault('pause', 'A', 'SIGSTOP');
    step(
      'Worker A',
      `Checked its lease, then is stopped (SIGSTOP) for at least ${Math.round(options.pauseMs)} ms`,
    );
    const gb = await bAcquire;
    if (gb.status !== 'ok') throw new Error(`B could not acquire ${key}: ${gb.status}`);
    step('Worker B', `Takes the lease with fencing token ${gb.token}`);
    const bw = await h.write(b, {
      scope: key,
      value: "B's result",
      fenced: options.fencing,
      check: true,
      token: gb.token!,
    });
    step('Worker B', "Writes the job's result");
    step(
      'Storage',
      `${bw.status === 'applied' ? 'Accepts' : 'Rejects'} B's write (token ${gb.token})`,
    );
    const left = options.pauseMs - (sharedNow() - stoppedAt);
    if (left > 0) await sleep(left);
    a.signal('SIGCONT');
    h.fault('resume', 'A', 'SIGCONT');
    step('Worker A', 'Resumes (SIGCONT), still believing its check, and writes');
    const aw = await aWrite;
    const aStatus = String(aw.status);
    step(
      'Storage',
      aStatus === 'applied'
        ? `Accepts A's write (token ${ga.token}) and overwrites B's result`
        : aStatus === 'stale_fence'
          ? `Rejects A's write: token ${ga.token} is older than ${gb.token}`
          : `A's write: ${aStatus}`,
    );
    const aRelease = await h.release(a, key, ga.token!, ga.lease!);
    const aRenew = await h.renew(a, key, ga.token!, ga.lease!, options.ttlMs);
    const bStatus = await b.request({ cmd: 'status' });
    await h.release(b, key, gb.token!, gb.lease!);
    const { history, report } = await h.finish();
    const p = report.figures.takeoverMs;
    return {
      steps,
      aToken: ga.token!,
      bToken: gb.token,
      aWrite: aStatus,
      bWrite: String(bw.status),
      aValidAfterResume: aw.validAfter === true,
      aRelease,
      aRenew,
      bValidAfterA: bStatus.valid === true,
      takeoverMs: p.length > 0 ? p[0] : undefined,
      history,
      report,
    };
  } finally {
    await Promise.all(h.workers.map((w) => w.kill()));
  }
}
