import type { IRequestOp, ITxnRequest } from 'etcd3';

/**
 * The etcd requests of the lock recipe that more than one module sends, as named builders.
 * Revisions are int64 decimal strings end to end (etcd3 passes them through unchanged).
 */

/** What etcd's key-value answers look like here. */
export interface Kv {
  key: Buffer;
  value: Buffer;
  create_revision: string;
  mod_revision: string;
  lease: string;
}

/** The contenders of a key: every entry under `KEY/`, oldest first. */
export function contendersRange(
  dir: Buffer,
  dirEnd: Buffer,
): Record<string, unknown> & { key: Buffer } {
  return { key: dir, range_end: dirEnd, sort_order: 'Ascend', sort_target: 'Create' };
}

/**
 * Entries under `KEY/` created before revision `below`, newest first, at most `limit`: the
 * first one that belongs to KEY itself is the waiter's predecessor (etcd's `waitDeletes`
 * reads the same with `WithLastCreate()` and `WithMaxCreateRev(myRev - 1)`).
 */
export function aheadRange(dir: Buffer, dirEnd: Buffer, below: bigint, limit: number): IRequestOp {
  return {
    request_range: {
      key: dir,
      range_end: dirEnd,
      sort_order: 'Descend',
      sort_target: 'Create',
      max_create_revision: (below - 1n).toString(),
      limit,
    },
  };
}

/**
 * Enqueue, one transaction: if our entry is absent, put it on the session lease and read the
 * newest contenders (ours first, then those ahead of us); the nested transaction records the
 * last-grant marker when `KEY/` was empty before our put, i.e. when this put is a grant.
 * Responses on success: [marker txn, put, range, epoch record]. On failure (our session
 * already has an entry on KEY): [range of that entry].
 */
export function enqueueTxn(o: {
  entryKey: Buffer;
  value: string;
  sessionId: string;
  dir: Buffer;
  dirEnd: Buffer;
  lastKey: Buffer;
  epochKey: Buffer;
  limit: number;
}): ITxnRequest {
  return {
    compare: [{ key: o.entryKey, target: 'Create', result: 'Equal', create_revision: 0 }],
    success: [
      {
        request_txn: {
          compare: [
            {
              key: o.dir,
              range_end: o.dirEnd,
              target: 'Create',
              result: 'Equal',
              create_revision: 0,
            },
          ],
          success: [{ request_put: { key: o.lastKey, value: Buffer.alloc(0) } }],
          failure: [],
        },
      },
      { request_put: { key: o.entryKey, value: Buffer.from(o.value), lease: o.sessionId } },
      {
        request_range: {
          key: o.dir,
          range_end: o.dirEnd,
          sort_order: 'Descend',
          sort_target: 'Create',
          limit: o.limit,
        },
      },
      { request_range: { key: o.epochKey } },
    ],
    failure: [{ request_range: { key: o.entryKey } }],
  };
}

/**
 * A waiter's re-check, read-only: if our entry still exists with our create revision and is
 * still attached to our session lease, read the contenders ahead of it. A failed compare
 * means the place is lost (deleted, or expired with its session): never grant on it.
 * Responses on success: [range ahead, epoch record].
 */
export function recheckTxn(o: {
  entryKey: Buffer;
  token: bigint;
  sessionId: string;
  dir: Buffer;
  dirEnd: Buffer;
  epochKey: Buffer;
  limit: number;
}): ITxnRequest {
  return {
    compare: [
      { key: o.entryKey, target: 'Create', result: 'Equal', create_revision: o.token.toString() },
      { key: o.entryKey, target: 'Lease', result: 'Equal', lease: o.sessionId },
    ],
    success: [
      aheadRange(o.dir, o.dirEnd, o.token, o.limit),
      { request_range: { key: o.epochKey } },
    ],
    failure: [],
  };
}

/**
 * Records `token` as the key's last grant while its entry still holds (create revision
 * unchanged), so a marker write that arrives late can never overwrite a newer grant's.
 */
export function markLastTxn(entryKey: Buffer, token: bigint, lastKey: Buffer): ITxnRequest {
  return {
    compare: [
      { key: entryKey, target: 'Create', result: 'Equal', create_revision: token.toString() },
    ],
    success: [{ request_put: { key: lastKey, value: Buffer.from(token.toString()) } }],
    failure: [],
  };
}

/** The gRPC call options of a request bounded by `timeoutMs` (at least 1 ms). */
export function callOptions(options: { readonly timeoutMs: number }): { deadline: Date } {
  return { deadline: new Date(Date.now() + Math.max(1, options.timeoutMs)) };
}

/**
 * Try-acquire's fast path, one transaction: if nobody contends for the key (no entry under
 * `KEY/`), put ours and the last-grant marker; otherwise read the contenders in create order.
 * Responses on success: [put, marker put, epoch record]; on failure: [contenders, epoch record].
 */
export function fastAcquireTxn(o: {
  entryKey: Buffer;
  value: string;
  sessionId: string;
  dir: Buffer;
  dirEnd: Buffer;
  lastKey: Buffer;
  epochOp: IRequestOp;
}): ITxnRequest {
  return {
    compare: [
      { key: o.dir, range_end: o.dirEnd, target: 'Create', result: 'Equal', create_revision: 0 },
    ],
    success: [
      { request_put: { key: o.entryKey, value: Buffer.from(o.value), lease: o.sessionId } },
      { request_put: { key: o.lastKey, value: Buffer.alloc(0) } },
      o.epochOp,
    ],
    failure: [{ request_range: contendersRange(o.dir, o.dirEnd) }, o.epochOp],
  };
}

/**
 * etcd's Mutex recipe step: put our entry if absent and read the contenders. Responses on
 * success: [put, contenders, epoch record]; on failure: [contenders, epoch record].
 */
export function recipePutTxn(o: {
  entryKey: Buffer;
  value: string;
  sessionId: string;
  dir: Buffer;
  dirEnd: Buffer;
  epochOp: IRequestOp;
}): ITxnRequest {
  return {
    compare: [{ key: o.entryKey, target: 'Create', result: 'Equal', create_revision: 0 }],
    success: [
      { request_put: { key: o.entryKey, value: Buffer.from(o.value), lease: o.sessionId } },
      { request_range: contendersRange(o.dir, o.dirEnd) },
      o.epochOp,
    ],
    failure: [{ request_range: contendersRange(o.dir, o.dirEnd) }, o.epochOp],
  };
}

/** Writes `token` into the key's last-grant marker, unconditionally. */
export function putLastTxn(lastKey: Buffer, token: bigint): ITxnRequest {
  return {
    compare: [],
    success: [{ request_put: { key: lastKey, value: Buffer.from(token.toString()) } }],
    failure: [],
  };
}

/**
 * Deletes `key` only while its create revision is still `token`; with `markLast`, records
 * `token` as the key's last grant in the same transaction.
 */
export function deleteByRevisionTxn(key: Buffer, token: bigint, markLast?: Buffer): ITxnRequest {
  return {
    compare: [{ key, target: 'Create', result: 'Equal', create_revision: token.toString() }],
    success:
      markLast === undefined
        ? [{ request_delete_range: { key } }]
        : [
            { request_delete_range: { key } },
            { request_put: { key: markLast, value: Buffer.from(token.toString()) } },
          ],
    failure: [],
  };
}

/** Deletes `key` only while its value is exactly `value` (a ghost: its token is unknown). */
export function deleteByValueTxn(key: Buffer, value: string): ITxnRequest {
  return {
    compare: [{ key, target: 'Value', result: 'Equal', value: Buffer.from(value) }],
    success: [{ request_delete_range: { key } }],
    failure: [],
  };
}

/** Read-only: `ops` in one transaction, so they see one revision. */
export function readTxn(...ops: IRequestOp[]): ITxnRequest {
  return { compare: [], success: ops, failure: [] };
}
