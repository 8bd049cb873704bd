import { LeaseholdError } from '../../core/errors.js';

/** The error of any call on an HTTP lease store after `close()`. */
export function storeClosedError(): LeaseholdError {
  return new LeaseholdError('ERR_CLOSED', 'the HTTP lease store was closed');
}

/** What a leasehold server answered with an error body. Carried as the `cause` of a LeaseholdError. */
export class HttpApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'HttpApiError';
  }
}

/** True when `err` shows the request never reached the server (so any request may be retried). */
export function neverSent(err: unknown): boolean {
  const code = errorCode(err);
  return code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN';
}

/**
 * True when `err` is a broken connection: the request may or may not have been processed, so
 * only idempotent requests may be retried.
 */
export function connectionBroken(err: unknown): boolean {
  const code = errorCode(err);
  return (
    neverSent(err) ||
    code === 'ECONNRESET' ||
    code === 'EPIPE' ||
    code === 'UND_ERR_SOCKET' ||
    code === 'UND_ERR_CLOSED'
  );
}

function errorCode(err: unknown): string | undefined {
  for (let e: unknown = err, i = 0; e !== undefined && e !== null && i < 5; i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}
