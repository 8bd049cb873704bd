import { setTimeout as sleep } from 'node:timers/promises';
import type { CheckReport } from '../check/checker.js';
import type { HistoryEvent } from '../history/events.js';
import { RealHarness, type RealHarnessOptions } from './harness.js';
import { sharedNow } from './protocol.js';

/** Options for {@link runOwnerRestartStory}. */
export interface OwnerRestartOptions extends RealHarnessOptions {
  readonly ttlMs: number;
  readonly fencing: boolean;
  /** The lease key and resource scope. */
  readonly key: string;
  /** The owner id both processes run with. */
  readonly ownerId: string;
}

/** What the owner-restart story produced. */
export interface OwnerRestartResult {
  readonly oldToken: string;
  /** The new process's first try (`wait: 0`) while the old lease is live: `busy` expected. */
  readonly firstTry: string;
  /** The owner id the store reported for the holder on that `busy`. */
  readonly firstTryHolder: string | undefined;
  readonly newToken: string;
  /** The new process's grant by the store's clock minus the old lease's store expiry (ms). */
  readonly grantAfterOldExpiryMs: number | undefined;
  readonly newWrite: string;
  /** The old process's write after SIGCONT, with its old token. */
  readonly oldWrite: string;
  /** The old process's release after it resumed (`not_owner`). */
  readonly oldRelease: string;
  /** The new process's renewal after that (`renewed`: the old one changed nothing). */
  readonly newRenew: string;
  readonly history: readonly HistoryEvent[];
  readonly report: CheckReport;
}

/**
 * An owner restarted while its old process still hangs: process `old` (owner id X) takes the
 * lease, checks it and is stopped (SIGSTOP) just before its write; a supervisor starts a new
 * process `new` with the same owner id X. The owner id names who holds a lease, it is not a
 * credential (the lease id is, chosen per acquisition): the new process must find the key
 * busy — held by X — and get it only after the old lease expires at the store, with a new,
 * higher token. Then the old process resumes and writes with its old token.
 */
export async function runOwnerRestartStory(o: OwnerRestartOptions): Promise<OwnerRestartResult> {
  const h = new RealHarness(o);
  h.meta({ scenario: 'owner-restart', ttlMs: o.ttlMs });
  try {
    // Both processes are started first: a process start can outlast a short TTL on a loaded
    // machine, and the point is what the new one finds while the old lease is live.
    const [old, next] = await Promise.all([
      h.spawn('old', { ownerId: o.ownerId }),
      h.spawn('new', { ownerId: o.ownerId }),
    ]);
    const g0 = await h.acquireGranted(old, o.key, {
      ttlMs: o.ttlMs,
      waitMs: 0,
      renewEveryMs: o.ttlMs / 4,
    });
    if (g0.status !== 'ok') throw new Error(`old could not acquire ${o.key}: ${g0.status}`);
    const checked = old.next('checked');
    const oldWrite = h.write(old, {
      scope: o.key,
      value: "old process's result",
      fenced: o.fencing,
      check: true,
      token: g0.token!,
      stopAfterCheck: true,
    });
    // Awaited below; a failure before that must not leave it unhandled.
    oldWrite.catch(() => undefined);
    await checked;
    for (let i = 0; !old.isStopped(); i++) {
      if (i > 500) throw new Error('the old process did not stop after its check');
      await sleep(5);
    }
    const stoppedAt = sharedNow();
    h.fault('pause', 'old', 'SIGSTOP: the old process hangs; its owner is restarted');
    const first = await h.acquire(next, o.key, { ttlMs: o.ttlMs, waitMs: 0 });
    if (first.status === 'ok')
      throw new Error(
        `the new process inherited the live lease (${sharedNow() - stoppedAt}ms after the old one stopped)`,
      );
    const g1 = await h.acquire(next, o.key, {
      ttlMs: o.ttlMs,
      waitMs: 6 * o.ttlMs,
      renewEveryMs: o.ttlMs / 4,
    });
    if (g1.status !== 'ok') throw new Error(`new could not acquire ${o.key}: ${g1.status}`);
    const nw = await h.write(next, {
      scope: o.key,
      value: "new process's result",
      fenced: o.fencing,
      check: true,
      token: g1.token!,
    });
    old.signal('SIGCONT');
    h.fault('resume', 'old', 'SIGCONT');
    const ow = await oldWrite;
    const oldRelease = await h.release(old, o.key, g0.token!, g0.lease!);
    const newRenew = await h.renew(next, o.key, g1.token!, g1.lease!, o.ttlMs);
    await h.release(next, o.key, g1.token!, g1.lease!);
    const { history, report } = await h.finish();
    // The old lease's last store expiry (its acquire or a renewal): the new grant must follow it.
    const oldExpiry = Math.max(
      ...history.flatMap((e) =>
        (e.type === 'acquire' || e.type === 'renew') &&
        e.phase === 'ok' &&
        e.proc === 'old' &&
        e.storeExpiresAt !== undefined
          ? [e.storeExpiresAt]
          : [],
      ),
    );
    const grantAt = g1.storeExpiresAt === undefined ? undefined : g1.storeExpiresAt - o.ttlMs;
    return {
      oldToken: g0.token!,
      firstTry: first.status,
      firstTryHolder: first.holderOwnerId,
      newToken: g1.token!,
      grantAfterOldExpiryMs:
        grantAt === undefined || !Number.isFinite(oldExpiry) ? undefined : grantAt - oldExpiry,
      newWrite: String(nw.status),
      oldWrite: String(ow.status),
      oldRelease,
      newRenew,
      history,
      report,
    };
  } finally {
    await Promise.all(h.workers.map((w) => w.kill()));
  }
}
