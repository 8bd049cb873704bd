/**
 * An AbortSignal that fires when any of `signals` fires or `timeoutMs` passes, with a
 * `dispose()` that detaches it again. Used instead of `AbortSignal.any`, which in Node 20
 * keeps every derived signal reachable from a long-lived source signal (such as a store's
 * "closing" signal), so that each call gets slower as the process runs.
 */
export function linkedSignal(
  signals: ReadonlyArray<AbortSignal | undefined>,
  timeoutMs?: number,
): { readonly signal: AbortSignal; readonly dispose: () => void } {
  const controller = new AbortController();
  const sources = signals.filter((s): s is AbortSignal => s !== undefined);
  const onAbort = function (this: AbortSignal): void {
    controller.abort(this.reason);
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  const dispose = (): void => {
    for (const s of sources) s.removeEventListener('abort', onAbort);
    if (timer !== undefined) clearTimeout(timer);
  };
  for (const s of sources) {
    if (s.aborted) {
      controller.abort(s.reason);
      return { signal: controller.signal, dispose: () => {} };
    }
    s.addEventListener('abort', onAbort, { once: true });
  }
  if (timeoutMs !== undefined) {
    timer = setTimeout(() => {
      controller.abort(new DOMException(`timed out after ${timeoutMs}ms`, 'TimeoutError'));
    }, timeoutMs);
    timer.unref();
  }
  controller.signal.addEventListener('abort', dispose, { once: true });
  return { signal: controller.signal, dispose };
}
