/** One abort listener per source signal, fanning out to every live link made from it. */
const fanOut = new WeakMap<AbortSignal, Set<(reason: unknown) => void>>();

/**
 * Calls `onAbort` once when `source` aborts; returns the unsubscribe. However many callers
 * subscribe, the signal carries one listener: adding and removing an EventTarget listener per
 * call costs more than the call itself on a hot path. The caller checks `source.aborted` first.
 */
export function onAbortOf(source: AbortSignal, onAbort: (reason: unknown) => void): () => void {
  let subscribers = fanOut.get(source);
  if (subscribers === undefined) {
    const set = new Set<(reason: unknown) => void>();
    subscribers = set;
    fanOut.set(source, set);
    source.addEventListener(
      'abort',
      () => {
        fanOut.delete(source);
        for (const fn of [...set]) fn(source.reason);
      },
      { once: true },
    );
  }
  const set = subscribers;
  set.add(onAbort);
  return () => set.delete(onAbort);
}

/**
 * A signal that aborts when any of `signals` does, and a `dispose` that detaches it.
 *
 * `AbortSignal.any` is not used for this on purpose: in Node 20 the source signals keep every
 * dependent signal they ever made, so linking a per-call signal to a long-lived one (the
 * client's close signal, an application's shutdown signal) grows memory and slows each later
 * call. Here each source carries a single listener however many calls share it (no
 * MaxListeners warnings), and a call's link is dropped when the call ends.
 */
export function linkSignals(signals: readonly AbortSignal[]): {
  signal: AbortSignal;
  dispose: () => void;
} {
  const controller = new AbortController();
  const unsubscribes: Array<() => void> = [];
  const dispose = (): void => {
    for (const u of unsubscribes) u();
    unsubscribes.length = 0;
  };
  for (const s of signals) {
    if (s.aborted) {
      controller.abort(s.reason);
      dispose();
      break;
    }
    unsubscribes.push(
      onAbortOf(s, (reason) => {
        controller.abort(reason);
        dispose();
      }),
    );
  }
  return { signal: controller.signal, dispose };
}
