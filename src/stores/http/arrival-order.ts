/**
 * A server that sends no `102 Processing` (an older version, or a proxy that drops interim
 * answers) would hold each wait back until the one before is answered: after this long, the
 * next is sent anyway, and the order between them is the server's.
 */
const ARRIVAL_WAIT_MS = 250;

/** Resolves when `previous` does, after `ARRIVAL_WAIT_MS`, or when `signal` aborts. */
export function inTurn(previous: Promise<void>, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(done, ARRIVAL_WAIT_MS);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
    void previous.then(done);
  });
}
