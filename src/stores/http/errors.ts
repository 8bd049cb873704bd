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

/** What the batcher and the store read from one API answer: the status and the parsed body. */
export interface Answer {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

/** The error of a call to the server at `url` that could not be sent or was not answered. */
export function unreachable(url: string, cause: unknown): LeaseholdError {
  return new LeaseholdError(
    'ERR_UNAVAILABLE',
    `cannot reach leasehold server ${url}: ${describe(cause)}`,
    { cause },
  );
}

/** The `error.code` of an error answer, if it has one. */
export function answerCode(a: Answer): string | undefined {
  const e = a.body['error'] as { code?: unknown } | undefined;
  return typeof e?.code === 'string' ? e.code : undefined;
}

/**
 * The error for an answer the operation `op` does not expect: 5xx, 408 and 429 are
 * `ERR_UNAVAILABLE` (the client answers `unavailable`); 400, 401, 403 and 413 are
 * `ERR_INVALID_ARGUMENT` (retrying will not help); anything else is `ERR_PROTOCOL`. The
 * `cause` is an {@link HttpApiError} with the status and the server's code and message.
 */
export function unexpectedAnswer(a: Answer, op: string): LeaseholdError {
  const e = a.body['error'] as { code?: unknown; message?: unknown } | undefined;
  const code = typeof e?.code === 'string' ? e.code : `http_${a.status}`;
  const message = typeof e?.message === 'string' ? e.message : `HTTP ${a.status}`;
  const cause = new HttpApiError(a.status, code, message);
  if (a.status >= 500 || a.status === 408 || a.status === 429) {
    return new LeaseholdError('ERR_UNAVAILABLE', `leasehold server: ${op}: ${code}: ${message}`, {
      cause,
    });
  }
  if (a.status === 401 || a.status === 403) {
    return new LeaseholdError(
      'ERR_INVALID_ARGUMENT',
      `apiToken was refused by the server (${code}): ${message}`,
      { cause },
    );
  }
  if (a.status === 400 || a.status === 413) {
    return new LeaseholdError('ERR_INVALID_ARGUMENT', message, { cause });
  }
  return new LeaseholdError(
    'ERR_PROTOCOL',
    `leasehold server: ${op}: unexpected ${a.status} ${code}: ${message}`,
    { cause },
  );
}

/** An error's message with its cause's, for error messages. */
export function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error ? `${err.message} (${cause.message})` : err.message;
  }
  return String(err);
}
