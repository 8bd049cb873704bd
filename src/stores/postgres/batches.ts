import { leaseIdPrefix } from '../../core/ids.js';
import type {
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreLeaseRef,
  StoreReleaseResult,
} from '../../core/store.js';
import { LeaseholdError } from '../../core/errors.js';
import { acquireAnswer } from './answers.js';
import type { PgResult, SqlParam } from '../../drivers/postgres/client.js';
import { Coalescer } from './coalesce.js';
import { sqlState } from '../../drivers/postgres/errors.js';

/**
 * How a batch of requests (decision 017) becomes the parameters of ACQUIRE_MANY or
 * RELEASE_MANY, and their rows the answer of each request.
 */

/** A grant request with its checked parameters (acquireParams). */
export interface AcquireAsk {
  readonly request: StoreAcquireRequest;
  readonly params: readonly SqlParam[];
}

/** The requests of an acquire batch that go to the database, and who follows whom. */
export interface AcquirePlan {
  /** One request per key (the first to arrive), in byte order of the keys. */
  readonly sent: readonly AcquireAsk[];
  /** ACQUIRE_MANY's parameters for `sent`. */
  readonly params: SqlParam[];
  /** For each request of the batch, the position in `sent` of the request that decides it. */
  readonly leader: readonly number[];
}

/**
 * Keys in byte order (= code point order, the "C" collation of the key column and the order
 * REGISTER_INTEREST locks rows in), so that batches of several stores never lock two rows in
 * opposite orders.
 */
export function byteOrder(a: string, b: string): number {
  // Compared as UTF-16 code units, without encoding: below the first difference both keys
  // encode alike, and two units that are not surrogates compare as their code points, which
  // is UTF-8's byte order. Only a surrogate there (a pair, or a lone one, which UTF-8
  // encodes as U+FFFD) needs the bytes. Encoding both keys for every comparison was a third
  // of a client's CPU renewing 10,000 leases (sorting each renewMany call of 2,000).
  const n = a.length < b.length ? a.length : b.length;
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  if (i === n && a.length === b.length) return 0;
  const x = i < a.length ? a.charCodeAt(i) : -1;
  const y = i < b.length ? b.charCodeAt(i) : -1;
  const before = i > 0 ? a.charCodeAt(i - 1) : 0;
  if (isSurrogate(x) || isSurrogate(y) || isSurrogate(before)) {
    return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
  }
  return x < y ? -1 : 1;
}

function isSurrogate(unit: number): boolean {
  return unit >= 0xd800 && unit <= 0xdfff;
}

const SURROGATE = /[\uD800-\uDFFF]/;

/**
 * Sorts `indexes` (positions in `keyAt`'s list) so their keys are in {@link byteOrder}, and
 * returns it. Without a surrogate in any key, UTF-16 code unit order is code point order,
 * which is UTF-8's byte order: the engine's own string comparison sorts them, and the
 * per-character comparator is left for batches that need it. Renewing 10,000 leases, the
 * comparator was the largest single part of the PostgreSQL store's client CPU (keys with a
 * long common prefix, 2,000 per call, about 22,000 comparisons).
 */
export function sortByKeyBytes(indexes: number[], keyAt: (i: number) => string): number[] {
  let plain = true;
  for (const i of indexes) {
    if (SURROGATE.test(keyAt(i))) {
      plain = false;
      break;
    }
  }
  return plain
    ? indexes.sort((x, y) => {
        const a = keyAt(x);
        const b = keyAt(y);
        return a < b ? -1 : a > b ? 1 : 0;
      })
    : indexes.sort((x, y) => byteOrder(keyAt(x), keyAt(y)));
}

/**
 * Plans an acquire batch. Several requests for one key (tasks spinning on a hot key) send
 * only the first: all of them were made before the statement was sent, so the one answer
 * the database gives for the key — the first's grant, or the holder that made it busy — is
 * a true answer for every one of them (see {@link acquireBatchAnswers}).
 */
export function planAcquires(asks: readonly AcquireAsk[]): AcquirePlan {
  const firstOf = new Map<string, number>();
  const firsts: number[] = [];
  asks.forEach((a, i) => {
    if (!firstOf.has(a.request.key)) {
      firstOf.set(a.request.key, i);
      firsts.push(i);
    }
  });
  sortByKeyBytes(firsts, (i) => asks[i]!.request.key);
  const slot = new Map<string, number>();
  firsts.forEach((askIndex, s) => slot.set(asks[askIndex]!.request.key, s));
  const sent = firsts.map((i) => asks[i]!);
  const column = (c: number): string[] => sent.map((a) => paramText(a.params[c]));
  const values = sent.map((a) => {
    const v = a.params[4];
    return v === null || v === undefined ? null : paramText(v);
  });
  return {
    sent,
    params: [column(0), column(1), column(2), column(3), values, column(5)],
    leader: asks.map((a) => slot.get(a.request.key)!),
  };
}

function paramText(p: SqlParam | undefined): string {
  if (typeof p === 'string') return p;
  if (typeof p === 'number' || typeof p === 'bigint') return String(p);
  throw new Error('a batched grant parameter must be text or a number');
}

/**
 * The answer of every request of an acquire batch from ACQUIRE_MANY's rows (by `i`). The
 * request that was sent gets its own row's answer. A follower on the same key gets:
 * - the same answer, if it is the same lease id (a retried request);
 * - after the leader's grant, busy with the leader's new lease as the holder;
 * - after a busy or 'held' answer, that holder — or the holder's own grant back, when the
 *   holder is the follower's lease id (as the grant function answers 'held').
 * No row (the grant lost its races): undefined for the whole key; the store asks again.
 */
export function acquireBatchAnswers(
  plan: AcquirePlan,
  asks: readonly AcquireAsk[],
  rows: ReadonlyArray<Record<string, unknown>>,
): Array<StoreAcquireResult | undefined> {
  const bySlot: Array<Record<string, unknown> | undefined> = [];
  for (const row of rows) bySlot[Number(row['i']) - 1] = row;
  const own = plan.sent.map((_, s) => acquireAnswer(bySlot[s]));
  return asks.map((ask, i) => {
    const s = plan.leader[i]!;
    const leader = plan.sent[s]!;
    const answer = own[s];
    if (leader === ask || answer === undefined) return answer;
    const mine = ask.request.leaseId.toLowerCase();
    if (leader.request.leaseId.toLowerCase() === mine) return answer;
    const row = bySlot[s]!;
    if (row['status'] === 'acquired' && answer.status === 'acquired') {
      const r = leader.request;
      return {
        status: 'busy',
        holder: {
          ownerId: r.ownerId,
          token: answer.token,
          remainingMs: r.ttlMs,
          leaseIdPrefix: leaseIdPrefix(r.leaseId),
          value: r.value,
        },
        retryAfterMs: r.ttlMs,
      };
    }
    const holderId = typeof row['owner_id'] === 'string' ? row['owner_id'].toLowerCase() : '';
    return acquireAnswer({ ...row, status: holderId === mine ? 'held' : 'busy' });
  });
}

/** A release batch: RELEASE_MANY's parameters, in byte order of the keys. */
export function planReleases(refs: readonly StoreLeaseRef[]): {
  readonly order: readonly number[];
  readonly params: SqlParam[];
} {
  const order = sortByKeyBytes(
    refs.map((_, i) => i),
    (i) => refs[i]!.key,
  );
  const sorted = order.map((i) => refs[i]!);
  return {
    order,
    params: [
      sorted.map((r) => r.key),
      sorted.map((r) => r.leaseId),
      sorted.map((r) => r.token.toString()),
    ],
  };
}

/**
 * Whether the releases of a failed batch may be sent again one by one: only when PostgreSQL
 * reported an error that rolled the transaction back (a deadlock, a lock or statement
 * timeout). A lost connection (class 08, or no SQLSTATE) or a terminated backend leaves it
 * unknown whether the batch committed; a release sent again would then answer `not_owner`
 * for a release that happened, so those requests fail as a single release would.
 */
export function releaseRetryable(err: unknown): boolean {
  const state = sqlState((err as { cause?: unknown } | null)?.cause ?? err);
  if (state === undefined || state.startsWith('08')) return false;
  return state !== '57P01' && state !== '57P02' && state !== '57P03';
}

/**
 * Statements of one kind out at once, and requests per statement. One grant statement and one
 * release statement at a time make the batches largest and the CPU per cycle least at 32
 * workers (decision 017); the rest of the pool serves renewals, hand-offs and reads.
 */
const MAX_IN_FLIGHT = 1;
const MAX_BATCH = 64;
const WHAT = 'PostgreSQL lease store';

/** Runs one rendered statement with its timeouts and commit mode; the last result. */
export type RunStatement = (
  statement: string,
  params: readonly SqlParam[],
  timeoutMs: number,
) => Promise<PgResult>;

/**
 * Sends one grant on its own (GRANT, migration 0005): its rows in ACQUIRE's shape
 * (`unpackGrant`), none after repeated lost races.
 */
export type GrantOne = (
  params: readonly SqlParam[],
  timeoutMs: number,
) => Promise<ReadonlyArray<Record<string, unknown>>>;

/** Sends one release on its own (RELEASE_ONE, migration 0005): whether it released. */
export type ReleaseOne = (ref: StoreLeaseRef, timeoutMs: number) => Promise<boolean>;

/**
 * Told of each key a committed statement granted (`'granted'`) or released (no argument),
 * before any of its requests is answered (decision 022).
 */
export type OnChange = (key: string, change?: 'granted') => void;

/** Whether an ACQUIRE row is a grant: new, or the same lease's own ('held', a retry). */
const isGrant = (row: Record<string, unknown> | undefined): boolean =>
  row?.['status'] === 'acquired' || row?.['status'] === 'held';

/** The store's grants: GRANT alone, ACQUIRE_MANY for several keys. */
export function acquireCoalescer(
  run: RunStatement,
  sql: { readonly many: string },
  grantOne: GrantOne,
  onChange?: OnChange,
): Coalescer<AcquireAsk, StoreAcquireResult | undefined> {
  return new Coalescer(
    {
      one: async (ask, timeoutMs) => {
        const row = (await grantOne(ask.params, timeoutMs))[0];
        if (isGrant(row)) onChange?.(ask.request.key, 'granted');
        return acquireAnswer(row);
      },
      many: async (asks, timeoutMs) => {
        const plan = planAcquires(asks);
        // Every request on one key (a hot key): the lone grant, for one of them.
        const rows =
          plan.sent.length === 1
            ? (await grantOne(plan.sent[0]!.params, timeoutMs)).map((r) => ({
                ...r,
                i: 1,
              }))
            : (await run(sql.many, plan.params, timeoutMs)).rows;
        if (onChange !== undefined) {
          for (const row of rows) {
            const sent = plan.sent[Number(row['i']) - 1];
            if (sent !== undefined && isGrant(row)) onChange(sent.request.key, 'granted');
          }
        }
        return acquireBatchAnswers(plan, asks, rows);
      },
      // A grant sent again with its lease id answers the grant it already made ('held').
      retryAlone: (err) => !(err instanceof LeaseholdError && err.code === 'ERR_CLOSED'),
    },
    MAX_IN_FLIGHT,
    MAX_BATCH,
    WHAT,
  );
}

/** The store's releases: RELEASE_ONE alone, RELEASE_MANY for several. */
export function releaseCoalescer(
  run: RunStatement,
  sql: { readonly many: string },
  releaseOne: ReleaseOne,
  onChange?: OnChange,
): Coalescer<StoreLeaseRef, StoreReleaseResult> {
  const answer = (released: boolean): StoreReleaseResult =>
    released ? { status: 'released' } : { status: 'not_owner' };
  return new Coalescer(
    {
      one: async (ref, timeoutMs) => {
        const released = await releaseOne(ref, timeoutMs);
        if (released) onChange?.(ref.key);
        return answer(released);
      },
      many: async (refs, timeoutMs) => {
        const plan = planReleases(refs);
        const rows = (await run(sql.many, plan.params, timeoutMs)).rows;
        const released = new Set(rows.map((r) => plan.order[Number(r['i']) - 1]));
        return refs.map((ref, i) => {
          const done = released.has(i);
          if (done) onChange?.(ref.key);
          return answer(done);
        });
      },
      retryAlone: releaseRetryable,
    },
    MAX_IN_FLIGHT,
    MAX_BATCH,
    WHAT,
  );
}
