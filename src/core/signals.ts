/**
 * A signal that aborts when any of `signals` does, and a `dispose` that detaches it.
 *
 * `AbortSignal.any` is not used for this on purpose: in Node 20 the source signals keep every
 * dependent signal they ever made, so linking a per-call signal to a long-lived one (the
 * client's close signal, an application's shutdown signal) grows memory and slows each later
 * call. Here the listeners are removed when the call ends.
 */
export function linkSignals(signals: readonly AbortSignal[]): {
  signal: AbortSignal;
  dispose: () => void;
} {
  const controller = new AbortController();
  const listeners: Array<[AbortSignal, () => void]> = [];
  const dispose = (): void => {
    for (const [s, l] of listeners) s.removeEventListener('abort', l);
    listeners.length = 0;
  };
  for (const s of signals) {
    if (s.aborted) {
      controller.abort(s.reason);
      dispose();
      break;
    }
    const onAbort = (): void => {
      controller.abort(s.reason);
      dispose();
    };
    s.addEventListener('abort', onAbort, { once: true });
    listeners.push([s, onAbort]);
  }
  return { signal: controller.signal, dispose };
}
