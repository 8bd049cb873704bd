import type { Logger } from 'pino';
import { isLeaseholdError } from '../core/errors.js';
import { ApiError } from '../http-service/api-error.js';
import type { ServerMetrics } from './metrics.js';

export { ApiError, API_ERROR_STATUS, type ApiErrorCode } from '../http-service/api-error.js';
interface FastifyishError {
  code?: unknown;
  statusCode?: unknown;
  validation?: unknown;
  validationContext?: unknown;
  message?: unknown;
}

/**
 * Maps anything a handler or Fastify threw to an {@link ApiError}: core validation errors to
 * `invalid_argument`, an unreachable store to `unavailable`, Fastify's body errors to 400/413.
 * Unknown errors become `internal` with a generic message (details go to the log only).
 */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (isLeaseholdError(err)) {
    switch (err.code) {
      case 'ERR_INVALID_ARGUMENT':
        return new ApiError('invalid_argument', err.message);
      case 'ERR_UNAVAILABLE':
      case 'ERR_CLOSED':
        return new ApiError('unavailable', `the lease store is unavailable: ${err.message}`);
      case 'ERR_ABORTED':
        return new ApiError('unavailable', 'the request was cancelled (server shutting down)');
      case 'ERR_LEASE_LOST':
      case 'ERR_CLOCK':
      case 'ERR_PROTOCOL':
        return new ApiError('internal', 'internal error');
    }
  }
  const e = (typeof err === 'object' && err !== null ? err : {}) as FastifyishError;
  const code = typeof e.code === 'string' ? e.code : '';
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return new ApiError('payload_too_large', 'request body is larger than the server accepts');
  }
  if (e.validation !== undefined && typeof e.message === 'string') {
    return new ApiError('invalid_argument', e.message);
  }
  if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return new ApiError('invalid_argument', 'body must be JSON (Content-Type: application/json)');
  }
  if (code === 'FST_ERR_CTP_EMPTY_JSON_BODY') {
    return new ApiError('invalid_argument', 'body must be a JSON object, got an empty body');
  }
  if (code === 'FST_ERR_CTP_INVALID_JSON_BODY' || err instanceof SyntaxError) {
    return new ApiError('invalid_argument', 'body must be valid JSON');
  }
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    if (e.statusCode === 413) return new ApiError('payload_too_large', 'request is too large');
    if (e.statusCode === 404) return new ApiError('not_found', 'no such route');
    if (e.statusCode === 414) return new ApiError('uri_too_long', 'the URL is too long');
    if (e.statusCode === 431) return new ApiError('headers_too_large', 'the headers are too large');
    return new ApiError(
      'invalid_argument',
      typeof e.message === 'string' ? e.message : 'bad request',
    );
  }
  return new ApiError('internal', 'internal error');
}

/**
 * Logs and counts an error answer the way every route does: internal errors with their
 * details, store outages as warnings, refused permissions in the auth-failure metric.
 */
export function reportApiError(
  api: ApiError,
  err: unknown,
  where: {
    readonly logger: Logger;
    readonly metrics: ServerMetrics;
    reqId: string;
    route: string | undefined;
  },
): void {
  const { logger, metrics, reqId, route } = where;
  if (api.code === 'internal') logger.error({ err, reqId, route }, 'internal error');
  else if (api.code === 'unavailable')
    logger.warn({ reqId, route, err: api.message }, 'store unavailable');
  if (api.code === 'permission_denied') metrics.authFailures.inc({ code: api.code });
}
