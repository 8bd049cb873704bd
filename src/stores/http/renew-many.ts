import { LeaseholdError } from '../../core/errors.js';
import type {
  StoreRenewManyResult,
  StoreRenewRequest,
  StoreRenewResult,
  StoreRequestOptions,
} from '../../core/store.js';
import { RENEWALS_PER_REQUEST_UNKNOWN_SERVER, type BatchLimits } from './batch.js';
import { answerCode, unexpectedAnswer, type Answer } from './errors.js';

/** What {@link renewInRequests} needs from its store. */
export interface RenewSink {
  /** Sends one `POST /v1/batch` body, as JSON text (retried as a renewal: it is conditional). */
  sendBatch(text: string, options: StoreRequestOptions): Promise<Answer>;
  /** Renews one lease with its own request. */
  renewOne(lease: StoreRenewRequest, options: StoreRequestOptions): Promise<StoreRenewResult>;
}

/** A renew operation's body, as `/v1/renew` and a batch take it (token as a decimal string). */
export function renewBody(lease: StoreRenewRequest): Record<string, unknown> {
  return {
    key: lease.key,
    leaseId: lease.leaseId,
    token: lease.token.toString(),
    ttl: lease.ttlMs,
  };
}

/**
 * Text JSON.stringify writes as it is between its quotes, and whose UTF-8 is one byte per
 * character: printable ASCII other than `"` and `\`.
 */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/**
 * A renew operation of a batch as JSON text, and its size in UTF-8 bytes: the text is exactly
 * `JSON.stringify({ op: 'renew', ...renewBody(lease) })`, written out directly — with the key
 * and lease id between plain quotes when {@link PLAIN} (nothing to escape, and the length is
 * the size), else through JSON.stringify and Buffer.byteLength. The text is needed anyway for
 * the request's size limit; serialising each operation once (not once to measure it and
 * again as part of the whole body), without an object per operation (decision 035).
 */
export function renewOp(lease: StoreRenewRequest): {
  readonly text: string;
  readonly bytes: number;
} {
  const tail = `"token":"${lease.token.toString()}","ttl":${JSON.stringify(lease.ttlMs)}}`;
  if (PLAIN.test(lease.key) && PLAIN.test(lease.leaseId)) {
    const text = `{"op":"renew","key":"${lease.key}","leaseId":"${lease.leaseId}",${tail}`;
    return { text, bytes: text.length };
  }
  const text =
    `{"op":"renew","key":${JSON.stringify(lease.key)},` +
    `"leaseId":${JSON.stringify(lease.leaseId)},${tail}`;
  return { text, bytes: Buffer.byteLength(text) };
}

/**
 * A renewal's answer from the server: 200 renewed; 410 `lost` and 409 `not_owner` both mean
 * the lease is not live at the store and never will be again. Anything else throws.
 */
export function renewResultOf(a: Answer): StoreRenewResult {
  if (a.status === 200) {
    const expires = a.body['expiresAtWallMs'];
    return {
      status: 'renewed',
      ...(typeof expires === 'number' ? { expiresAtWallMs: expires } : {}),
    };
  }
  if (a.status === 410 || (a.status === 409 && answerCode(a) === 'not_owner'))
    return { status: 'lost' };
  throw unexpectedAnswer(a, 'renew');
}

/**
 * `HttpLeaseStore.renewMany`: the leases as `POST /v1/batch` requests of renewals only, each
 * within the server's limits (`batchMaxRenewals` and the body limit, from `/v1/info`), so a
 * call of up to 2,000 leases is one request that the server turns into one store call. The
 * requests of one call go out together. A server that refuses the batch whole (400, 413, or
 * 404 without the route: nothing ran) gets the leases one request each.
 *
 * Each lease keeps its own answer (`lost` for one does not touch the others). An answer the
 * result type cannot hold for one lease (403 on its key, a 5xx for its operation) is that
 * lease's `unanswered` with the error its own `renew` would have thrown: the client retries
 * that renewal alone, and a key the caller may no longer renew cannot fail the others. An
 * answer to the request as a whole that is not 200 fails the call (no lease's outcome known).
 */
export async function renewInRequests(
  sink: RenewSink,
  leases: readonly StoreRenewRequest[],
  limits: BatchLimits,
  options: StoreRequestOptions,
): Promise<StoreRenewManyResult[]> {
  const perRequest = limits.maxRenewals ?? RENEWALS_PER_REQUEST_UNKNOWN_SERVER;
  const chunks: Chunk[] = [];
  let chunk: Chunk = { leases: [], ops: [] };
  let bytes = 0;
  for (const lease of leases) {
    const op = renewOp(lease);
    const size = op.bytes + 1;
    // `{"ops":[` and `]}`: 10 bytes of envelope.
    if (
      chunk.leases.length > 0 &&
      (chunk.leases.length >= perRequest || bytes + size + 10 > limits.maxBytes)
    ) {
      chunks.push(chunk);
      chunk = { leases: [], ops: [] };
      bytes = 0;
    }
    chunk.leases.push(lease);
    chunk.ops.push(op.text);
    bytes += size;
  }
  if (chunk.leases.length > 0) chunks.push(chunk);
  const answers = await Promise.all(chunks.map((c) => renewChunk(sink, c, options)));
  return answers.flat();
}

/** The leases of one request and their operations' JSON text. */
interface Chunk {
  readonly leases: StoreRenewRequest[];
  readonly ops: string[];
}

async function renewChunk(
  sink: RenewSink,
  chunk: Chunk,
  options: StoreRequestOptions,
): Promise<StoreRenewManyResult[]> {
  if (chunk.leases.length === 1) return [await sink.renewOne(chunk.leases[0]!, options)];
  const a = await sink.sendBatch(`{"ops":[${chunk.ops.join(',')}]}`, options);
  if (a.status === 400 || a.status === 404 || a.status === 413) {
    return Promise.all(chunk.leases.map((l) => sink.renewOne(l, options)));
  }
  if (a.status !== 200) throw unexpectedAnswer(a, 'renew');
  const results = a.body['results'];
  if (!Array.isArray(results) || results.length !== chunk.leases.length) {
    throw new LeaseholdError(
      'ERR_PROTOCOL',
      'leasehold server: batch: results do not match the renewals',
    );
  }
  return results.map((r: unknown) => {
    const one = r as { httpStatus?: unknown; body?: unknown } | null;
    if (
      typeof one !== 'object' ||
      one === null ||
      typeof one.httpStatus !== 'number' ||
      typeof one.body !== 'object' ||
      one.body === null
    ) {
      throw new LeaseholdError('ERR_PROTOCOL', 'leasehold server: batch: malformed result');
    }
    return ownResultOf({ status: one.httpStatus, body: one.body as Record<string, unknown> });
  });
}

/** One operation's answer inside a batch: its renewal result, or its own error. */
function ownResultOf(a: Answer): StoreRenewManyResult {
  try {
    return renewResultOf(a);
  } catch (err) {
    return { status: 'unanswered', error: err instanceof Error ? err : new Error(String(err)) };
  }
}
