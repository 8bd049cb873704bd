/**
 * The error codes of the HTTP fence (gateway and middleware): the same strings in bodies,
 * logs and metric labels.
 */
export type FenceErrorCode =
  | 'invalid_argument'
  | 'unauthenticated'
  | 'permission_denied'
  | 'not_found'
  | 'request_timeout'
  | 'stale_fence'
  | 'duplicate'
  | 'version_mismatch'
  | 'payload_too_large'
  | 'uri_too_long'
  | 'headers_too_large'
  | 'busy'
  | 'internal'
  | 'bad_gateway'
  | 'unavailable'
  | 'gateway_timeout';

/** The HTTP status of each {@link FenceErrorCode}. */
export const FENCE_ERROR_STATUS: Readonly<Record<FenceErrorCode, number>> = Object.freeze({
  invalid_argument: 400,
  unauthenticated: 401,
  permission_denied: 403,
  not_found: 404,
  request_timeout: 408,
  stale_fence: 409,
  duplicate: 409,
  version_mismatch: 409,
  payload_too_large: 413,
  uri_too_long: 414,
  headers_too_large: 431,
  busy: 429,
  internal: 500,
  bad_gateway: 502,
  unavailable: 503,
  gateway_timeout: 504,
});

/** The body of an error answer: `{ "error": { "code", "message" } }`. */
export function fenceErrorBody(code: FenceErrorCode, message: string): string {
  return JSON.stringify({ error: { code, message } });
}

/** An error answer, thrown inside handlers and turned into the body above. */
export class FenceHttpError extends Error {
  readonly status: number;
  constructor(
    readonly code: FenceErrorCode,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = 'FenceHttpError';
    this.status = FENCE_ERROR_STATUS[code];
  }
}

/**
 * Maps what Fastify or Node raised before a handler ran (framing, limits, parsing) to an error
 * answer; unknown errors become `internal` (details belong in the log only).
 */
export function toFenceHttpError(err: unknown): FenceHttpError {
  if (err instanceof FenceHttpError) return err;
  const e = (typeof err === 'object' && err !== null ? err : {}) as {
    code?: unknown;
    statusCode?: unknown;
    status?: unknown;
  };
  const code = typeof e.code === 'string' ? e.code : '';
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE' || code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW')
    return new FenceHttpError(
      'payload_too_large',
      'request body is larger than the gateway accepts',
    );
  if (code === 'HPE_HEADER_OVERFLOW')
    return new FenceHttpError(
      'headers_too_large',
      'request line and headers are larger than accepted',
    );
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT')
    return new FenceHttpError('request_timeout', 'the request did not arrive in time');
  if (code.startsWith('HPE_'))
    return new FenceHttpError('invalid_argument', `malformed HTTP request (${code})`);
  const status =
    typeof e.statusCode === 'number' ? e.statusCode : typeof e.status === 'number' ? e.status : 0;
  if (status === 413) return new FenceHttpError('payload_too_large', 'request is too large');
  if (status === 414) return new FenceHttpError('uri_too_long', 'request URL is too long');
  if (status === 431)
    return new FenceHttpError('headers_too_large', 'request headers are too large');
  if (status === 404) return new FenceHttpError('not_found', 'no such route');
  if (status >= 400 && status < 500) return new FenceHttpError('invalid_argument', 'bad request');
  return new FenceHttpError('internal', 'internal error');
}
