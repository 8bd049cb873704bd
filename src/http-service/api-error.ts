/** The error codes of the HTTP API (DESIGN §6), the same strings in bodies, logs and metrics. */
export type ApiErrorCode =
  | 'invalid_argument'
  | 'unauthenticated'
  | 'permission_denied'
  | 'not_found'
  | 'method_not_allowed'
  | 'request_timeout'
  | 'busy'
  | 'not_owner'
  | 'lost'
  | 'payload_too_large'
  | 'uri_too_long'
  | 'headers_too_large'
  | 'unavailable'
  | 'internal';

/** The HTTP status of each {@link ApiErrorCode}. */
export const API_ERROR_STATUS: Readonly<Record<ApiErrorCode, number>> = Object.freeze({
  invalid_argument: 400,
  unauthenticated: 401,
  permission_denied: 403,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  busy: 409,
  not_owner: 409,
  lost: 410,
  payload_too_large: 413,
  uri_too_long: 414,
  headers_too_large: 431,
  unavailable: 503,
  internal: 500,
});

/** An error answer of the API: `{ "error": { "code", "message" } }` plus optional fields. */
export class ApiError extends Error {
  readonly code: ApiErrorCode;
  readonly status: number;
  readonly extra: Record<string, unknown> | undefined;

  constructor(code: ApiErrorCode, message: string, extra?: Record<string, unknown>) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
    this.status = API_ERROR_STATUS[code];
    this.extra = extra;
  }

  /** The JSON body sent for this error. */
  body(): Record<string, unknown> {
    return { error: { code: this.code, message: this.message }, ...this.extra };
  }
}
