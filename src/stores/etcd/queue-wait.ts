import { isLeaseholdError } from '../../core/errors.js';
import type {
  StoreAcquireRequest,
  StoreQueuedOptions,
  StoreQueuedResult,
  StoreRequestOptions,
} from '../../core/store.js';
import type { HeldEntry } from './held-entries.js';
import { stopDeletionWatch, watchDeletion, type DeletionWatch } from './notify.js';
import type { Place, QueueHost, QueueReads } from './queue-read.js';

/** Why a parked waiter woke up. */
type Wake = 'deleted' | 'watch' | 'gone' | 'poll' | 'deadline' | 'aborted' | 'closed';

/** The steps of the queue (queue.ts) a parked waiter takes when it wakes up. */
export interface QueueSteps {
  readonly h: QueueHost;
  readonly reader: QueueReads;
  /** The waiter holds: the grant's answer. */
  grant(e: HeldEntry, validFrom: number, storeAt: number, marked: boolean): StoreQueuedResult;
  /** The wait ran out with an entry still ahead: leave the queue and answer busy. */
  giveUp(place: Place, key: string, rt: StoreRequestOptions): Promise<StoreQueuedResult>;
  /** Removes the waiter's entry (only while it is still its own). */
  leave(place: Place): Promise<void>;
  /** Throws `ERR_CLOSED` or the abort reason when the store closed or the wait was aborted. */
  throwIfEnded(signal: AbortSignal): void;
}

/**
 * Parks until the entry ahead is deleted, then re-checks; repeats while another entry is
 * still ahead. Returns the answer, or `gone` when our place vanished (queue again).
 */
export async function waitInQueue(
  q: QueueSteps,
  place: Place,
  request: StoreAcquireRequest,
  options: StoreQueuedOptions,
  rt: StoreRequestOptions,
  waitUntil: number,
): Promise<StoreQueuedResult | 'gone'> {
  const { e, session } = place;
  const pending = new Set<Wake>();
  let wake: (() => void) | undefined;
  const notify = (why: Wake): void => {
    pending.add(why);
    wake?.();
  };
  e.onGone = () => notify('gone');
  const onAbort = (): void => notify('aborted');
  const onClose = (): void => notify('closed');
  options.signal.addEventListener('abort', onAbort, { once: true });
  q.h.closing.addEventListener('abort', onClose, { once: true });
  // The entry lives only as long as its session: keep it alive while we wait (rounds are
  // shared with every other lease and waiter on the session). TTL 0 kills the session,
  // which marks our entry gone.
  const keepEveryMs = Math.max(200, Math.floor((session.ttlS * 1000) / 3));
  const keeper = setInterval(() => {
    q.h.pool.confirm(session, performance.now(), rt.timeoutMs, 'strict').catch(() => undefined);
  }, keepEveryMs);
  let watch: DeletionWatch | undefined;
  const stopWatch = (): void => {
    if (watch === undefined) return;
    stopDeletionWatch(watch);
    watch = undefined;
  };
  let outcome: 'granted' | 'gone' | 'left' = 'left';
  try {
    let failures = 0;
    let recheck = false;
    for (;;) {
      q.throwIfEnded(options.signal);
      if (e.gone || session.dead) {
        outcome = 'gone';
        return 'gone';
      }
      let why: Wake | 'gap' | 'retry' = 'retry';
      try {
        if (!recheck) {
          const aheadKey = place.ahead.key.toString('utf8');
          if (watch === undefined || watch.key !== aheadKey) {
            stopWatch();
            watch = await watchDeletion(
              q.h.client,
              aheadKey,
              rt,
              () => notify('deleted'),
              () => notify('watch'),
            );
          }
          if (watch.createdRev > place.readRev) {
            // Something was written between our read and the watch: the entry ahead may
            // have been deleted in that gap. Read again rather than watch from the past,
            // which etcd serves only in its 100 ms catch-up batches.
            why = 'gap';
          } else {
            options.onParked?.();
            why = await sleep(pending, (w) => (wake = w), waitUntil, options.pollIntervalMs);
            wake = undefined;
          }
          if (why === 'aborted' || why === 'closed') q.throwIfEnded(options.signal);
          if (why === 'gone') {
            outcome = 'gone';
            return 'gone';
          }
          if (why === 'watch') stopWatch();
        }
        const check = await q.reader.check(place, request.key, options, rt);
        failures = 0;
        recheck = false;
        if (check.kind === 'gone') {
          outcome = 'gone';
          return 'gone';
        }
        if (check.kind === 'head') {
          outcome = 'granted';
          return q.grant(e, check.validFrom, check.storeAt, false);
        }
        place.ahead = check.ahead;
        place.readRev = check.readRev;
      } catch (err) {
        // A transient failure (a member restarting, a leader election) need not cost the
        // waiter its place: keep the entry, back off, and re-check while the wait lasts.
        const backoffMs = Math.min(1000, 50 * 2 ** failures) * (0.5 + Math.random() / 2);
        if (!isLeaseholdError(err, 'ERR_UNAVAILABLE') || performance.now() + backoffMs >= waitUntil)
          throw err;
        failures++;
        recheck = true;
        stopWatch();
        await new Promise((r) => setTimeout(r, backoffMs));
        continue;
      }
      if (why === 'deadline' || performance.now() >= waitUntil) {
        return await q.giveUp(place, request.key, rt);
      }
    }
  } finally {
    clearInterval(keeper);
    stopWatch();
    e.onGone = undefined;
    options.signal.removeEventListener('abort', onAbort);
    q.h.closing.removeEventListener('abort', onClose);
    if (outcome === 'left') await q.leave(place);
    else if (outcome === 'gone') q.h.forget(e);
  }
}

/** Waits for the first pending reason, the backstop poll, or the end of the wait. */
function sleep(
  pending: Set<Wake>,
  setWake: (w: () => void) => void,
  waitUntil: number,
  pollMs: number,
): Promise<Wake> {
  const take = (): Wake | undefined => {
    for (const w of ['aborted', 'closed', 'gone', 'deleted', 'watch', 'poll'] as const) {
      if (pending.has(w)) {
        pending.clear();
        return w;
      }
    }
    return undefined;
  };
  const ready = take();
  if (ready !== undefined) return Promise.resolve(ready);
  const left = waitUntil - performance.now();
  if (left <= 0) return Promise.resolve('deadline');
  return new Promise((resolve) => {
    const byDeadline = left <= pollMs;
    const timer = setTimeout(
      () => {
        setWake(() => undefined);
        resolve(byDeadline ? 'deadline' : 'poll');
      },
      Math.max(1, Math.min(left, pollMs)),
    );
    setWake(() => {
      const w = take();
      if (w === undefined) return;
      clearTimeout(timer);
      setWake(() => undefined);
      resolve(w);
    });
  });
}
