import { LeaseholdError } from '../../../src/core/errors.js';
import type { FenceWriteOutcome } from '../../../src/testing/fence-contract/index.js';

/**
 * A header value as the bytes a client sends: UTF-8, each byte one Latin-1 character (what
 * fetch puts on the wire), so that a token like "٣" reaches the fence instead of being
 * refused by the client.
 */
export function headerValue(token: bigint | string): string {
  return Buffer.from(token.toString(), 'utf8').toString('latin1');
}

/** A fenced PUT over HTTP, its answer read as the fence contract reads answers. */
export async function fencedPut(
  url: string,
  token: bigint | string,
  value: string,
  idempotencyKey: string | undefined,
): Promise<FenceWriteOutcome> {
  const r = await fetch(url, {
    method: 'PUT',
    headers: {
      'fencing-token': headerValue(token),
      ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }),
    },
    body: value,
  });
  const text = await r.text();
  if (r.ok) {
    return r.headers.get('idempotent-replayed') === 'true'
      ? { status: 'duplicate' }
      : { status: 'applied' };
  }
  return refusal(r, text);
}

/** A 4xx/5xx answer: stale_fence and duplicate as outcomes, 400 as the typed error, else thrown. */
export function refusal(r: Response, text: string): FenceWriteOutcome {
  const code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
  if (r.status === 409 && code === 'stale_fence')
    return { status: 'stale_fence', highWaterMark: BigInt(r.headers.get('fencing-mark') ?? '-1') };
  if (r.status === 409 && code === 'duplicate') return { status: 'duplicate' };
  if (r.status === 400 && code === 'invalid_argument')
    throw new LeaseholdError('ERR_INVALID_ARGUMENT', `refused over HTTP: ${text}`);
  throw new Error(`unexpected answer ${r.status}: ${text}`);
}

/**
 * A scope as one path segment ('/' as '.'; the kit's scopes hold no '.'), so a route maps it
 * back to a scope of its own.
 */
export function segmentOf(scope: string): string {
  if (scope.includes('.')) throw new Error(`scope ${scope} has a '.'`);
  return scope.replaceAll('/', '.');
}
