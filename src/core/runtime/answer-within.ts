import { LeaseholdError } from './errors.js';

/**
 * The one bounded call for work that cannot be cancelled: settles like `work`, or rejects
 * `ERR_UNAVAILABLE` after `ms` when no answer came. A late result is handed to `onLate` (to
 * give a connection back, or release what it granted); a late failure is ignored. Used where
 * a driver would otherwise wait forever: a PostgreSQL statement behind a stalled pooler
 * (`statement_timeout` bounds it only once it reaches the server), an etcd watch or keepalive
 * stream that is never created, a Redis node that never answers the start-up check. A store
 * request of the client goes through `boundedRequest` (request.ts), which also takes an
 * abort signal and runs on the client's clock.
 */
export function answerWithin<T>(
  work: Promise<T>,
  ms: number,
  what: string,
  onLate?: (late: T) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let done = false;
    const timer = setTimeout(() => {
      done = true;
      reject(new LeaseholdError('ERR_UNAVAILABLE', `${what}: no answer within ${ms} ms`));
    }, ms);
    work.then(
      (value) => {
        if (!done) {
          done = true;
          clearTimeout(timer);
          resolve(value);
        } else onLate?.(value);
      },
      (err: unknown) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}
