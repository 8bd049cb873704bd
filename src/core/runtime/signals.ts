/** One subscription of {@link onAbortOf}: a link in its source's list. */
interface Subscription {
  fn: ((reason: unknown) => void) | undefined;
  prev: Subscription | undefined;
  next: Subscription | undefined;
}

/** The subscribers of one source signal, in subscription order. */
interface Subscribers {
  head: Subscription | undefined;
  tail: Subscription | undefined;
}

/** One abort listener per source signal, fanning out to every live link made from it. */
const fanOut = new WeakMap<AbortSignal, Subscribers>();

/**
 * Calls `onAbort` once when `source` aborts; returns the unsubscribe. However many callers
 * subscribe, the signal carries one listener: adding and removing an EventTarget listener per
 * call costs more than the call itself on a hot path. The caller checks `source.aborted` first.
 *
 * The subscribers are a linked list, not a `Set`: a long-lived V8 `Set` or `Map` with an
 * add and a delete per request keeps its deleted entries until it rehashes, so every
 * request's objects survived young-generation collections and were promoted; a client over
 * Redis spent a tenth of its time in the garbage collector, most of it for this.
 */
export function onAbortOf(source: AbortSignal, onAbort: (reason: unknown) => void): () => void {
  let subscribers = fanOut.get(source);
  if (subscribers === undefined) {
    const list: Subscribers = { head: undefined, tail: undefined };
    subscribers = list;
    fanOut.set(source, list);
    source.addEventListener(
      'abort',
      () => {
        fanOut.delete(source);
        const fns: Array<(reason: unknown) => void> = [];
        for (let s = list.head; s !== undefined; s = s.next) if (s.fn !== undefined) fns.push(s.fn);
        list.head = undefined;
        list.tail = undefined;
        for (const fn of fns) fn(source.reason);
      },
      { once: true },
    );
  }
  const list = subscribers;
  const sub: Subscription = { fn: onAbort, prev: list.tail, next: undefined };
  if (list.tail === undefined) list.head = sub;
  else list.tail.next = sub;
  list.tail = sub;
  return () => {
    if (sub.fn === undefined) return;
    sub.fn = undefined;
    // After the source fired, head and tail are cleared: only the detached links change.
    if (sub.prev !== undefined) sub.prev.next = sub.next;
    else if (list.head === sub) list.head = sub.next;
    if (sub.next !== undefined) sub.next.prev = sub.prev;
    else if (list.tail === sub) list.tail = sub.prev;
    sub.prev = undefined;
    sub.next = undefined;
  };
}

/**
 * A signal that aborts when any of `signals` does (undefined entries are skipped), and a
 * `dispose` that detaches it. The one signal linker of the package: the client, the HTTP
 * store and the server all link through it.
 *
 * `AbortSignal.any` is not used for this on purpose: in Node 20 the source signals keep every
 * dependent signal they ever made, so linking a per-call signal to a long-lived one (the
 * client's close signal, an application's shutdown signal) grows memory and slows each later
 * call. Here each source carries a single listener however many calls share it (no
 * MaxListeners warnings), and a call's link is dropped when the call ends.
 */
export function linkSignals(signals: ReadonlyArray<AbortSignal | undefined>): {
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
    if (s === undefined) continue;
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
