import { invalidArgument } from '../../core/errors.js';
import { LIMITS } from '../../core/validate.js';

/** Header names of the HTTP fence (lower case, as Node gives them). */
export interface FenceHeaderNames {
  /** The writer's token. Defaults to `fencing-token`. */
  readonly token: string;
  /** An idempotency key for retries under one token. Defaults to `idempotency-key`. */
  readonly idempotencyKey: string;
  /** The scope version the writer expects. Defaults to `fencing-expected-version`. */
  readonly expectedVersion: string;
}

/** The default {@link FenceHeaderNames}. */
export const FENCE_HEADERS: FenceHeaderNames = Object.freeze({
  token: 'fencing-token',
  idempotencyKey: 'idempotency-key',
  expectedVersion: 'fencing-expected-version',
});

/** Response headers: the scope's current mark (on `stale_fence`) and version. */
export const MARK_HEADER = 'fencing-mark';
/** See {@link MARK_HEADER}. */
export const VERSION_HEADER = 'fencing-version';

/** The fencing fields of one request, parsed; or why they are malformed. */
export type FenceFields =
  | {
      readonly status: 'ok';
      readonly token: bigint;
      readonly idempotencyKey: string | undefined;
      readonly expectedVersion: bigint | undefined;
    }
  | { readonly status: 'invalid'; readonly message: string };

const TOKEN = /^[1-9][0-9]{0,18}$/;
const MAX_TOKEN_TEXT = LIMITS.maxToken.toString();
const VERSION = /^(0|[1-9][0-9]{0,18})$/;
const KEY = /^[\x21-\x7e]{1,200}$/;

type Headers = Readonly<Record<string, string | string[] | undefined>>;

function one(headers: Headers, name: string): string | undefined | string[] {
  return headers[name];
}

/**
 * Reads the token (required: a canonical decimal from 1 to 2^63-1, never through a JS
 * number), the optional idempotency key (1–200 printable ASCII characters) and the optional
 * expected version (a canonical decimal from 0) from request headers. A repeated header is
 * refused: two values for one token cannot be told apart safely.
 */
export function parseFenceHeaders(headers: Headers, names: FenceHeaderNames): FenceFields {
  const t = one(headers, names.token);
  if (Array.isArray(t))
    return { status: 'invalid', message: `header ${names.token} was sent more than once` };
  if (t === undefined)
    return { status: 'invalid', message: `header ${names.token} (the fencing token) is required` };
  // Canonical decimals of equal length order as strings: only a 19-digit token needs the
  // comparison with the largest one, and no token is turned into a bigint twice.
  if (!TOKEN.test(t) || (t.length === MAX_TOKEN_TEXT.length && t > MAX_TOKEN_TEXT))
    return {
      status: 'invalid',
      message: `header ${names.token} must be a decimal integer from 1 to 9223372036854775807 without sign, spaces or leading zeros, got ${JSON.stringify(t.slice(0, 40))}`,
    };
  const k = one(headers, names.idempotencyKey);
  if (Array.isArray(k))
    return { status: 'invalid', message: `header ${names.idempotencyKey} was sent more than once` };
  if (k !== undefined && !KEY.test(k))
    return {
      status: 'invalid',
      message: `header ${names.idempotencyKey} must be 1 to 200 printable ASCII characters without spaces`,
    };
  const v = one(headers, names.expectedVersion);
  if (Array.isArray(v))
    return {
      status: 'invalid',
      message: `header ${names.expectedVersion} was sent more than once`,
    };
  if (v !== undefined && (!VERSION.test(v) || BigInt(v) > LIMITS.maxToken))
    return {
      status: 'invalid',
      message: `header ${names.expectedVersion} must be a decimal integer from 0 to 9223372036854775807 without sign or leading zeros, got ${JSON.stringify(v.slice(0, 40))}`,
    };
  return {
    status: 'ok',
    token: BigInt(t),
    idempotencyKey: k,
    expectedVersion: v === undefined ? undefined : BigInt(v),
  };
}

/** Header-name options as given by a user: any may be left out. */
export interface FenceHeaderOptions {
  readonly token?: string;
  readonly idempotencyKey?: string;
  readonly expectedVersion?: string;
}

/** Resolves `headers` options (field names as `headers.token` …) over {@link FENCE_HEADERS}. */
export function resolveHeaderNames(h: FenceHeaderOptions = {}): FenceHeaderNames {
  return {
    token: headerName('headers.token', h.token, FENCE_HEADERS.token),
    idempotencyKey: headerName(
      'headers.idempotencyKey',
      h.idempotencyKey,
      FENCE_HEADERS.idempotencyKey,
    ),
    expectedVersion: headerName(
      'headers.expectedVersion',
      h.expectedVersion,
      FENCE_HEADERS.expectedVersion,
    ),
  };
}

/** Lower-cases and checks a header name option. */
export function headerName(field: string, value: unknown, fallback: string): string {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/.test(value))
    throw invalidArgument(field, 'must be an HTTP header name', value);
  return value.toLowerCase();
}
