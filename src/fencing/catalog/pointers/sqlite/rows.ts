import { invalidArgument, LeaseholdError } from '../../../../core/errors.js';
import type { PublishRequest } from '../../pointer-store.js';
import type { CatalogEntry } from '../../results.js';

/** A row of the pointer table (and of the history, which has the same columns). */
export interface PointerRow {
  name: string;
  handle: string;
  token: bigint;
  lease_key: string;
  lease_id: string;
  version: bigint;
  size: bigint;
  checksum: string;
  published_ms: bigint;
  high_water: bigint;
}

export function entryOf(row: PointerRow): CatalogEntry {
  return {
    name: row.name,
    handle: row.handle,
    token: BigInt(row.token),
    leaseKey: row.lease_key,
    leaseId: row.lease_id,
    version: Number(row.version),
    size: Number(row.size),
    checksum: row.checksum,
    publishedAtMs: Number(row.published_ms),
  };
}

export function mapValues<K extends string, A, B>(
  from: Record<K, A>,
  f: (a: A) => B,
): Record<K, B> {
  return Object.fromEntries(Object.entries(from).map(([k, v]) => [k, f(v as A)])) as Record<K, B>;
}

/**
 * A record with the keys of `from` whose values `f` makes when each is first read, kept from
 * then on (a getter that replaces itself with the value).
 */
export function preparedOnFirstUse<K extends string, A, B>(
  from: Record<K, A>,
  f: (a: A) => B,
): Record<K, B> {
  const out = {} as Record<K, B>;
  for (const [k, v] of Object.entries(from) as [K, A][]) {
    Object.defineProperty(out, k, {
      configurable: true,
      enumerable: true,
      get: () => {
        const value = f(v);
        Object.defineProperty(out, k, { value, enumerable: true });
        return value;
      },
    });
  }
  return out;
}

/** A publish under a lease key other than the one every publish of the name used. */
export function wrongKey(req: PublishRequest, currentKey: string): LeaseholdError {
  return invalidArgument(
    'lease.key',
    `must be the key every publish of ${req.name} uses (${JSON.stringify(currentKey)}): tokens of different keys do not compare`,
    req.leaseKey,
  );
}

/** A locked database is ERR_UNAVAILABLE, as everywhere; other errors pass as they are. */
export function storeError(err: unknown): Error {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') {
    return new LeaseholdError('ERR_UNAVAILABLE', `catalog database is locked: ${String(err)}`, {
      cause: err,
    });
  }
  return err instanceof Error ? err : new Error(String(err));
}

/**
 * The stage took longer than the collector's retention and its row was collected: transient
 * for the caller (stage again; choose a longer retention), not a broken invariant.
 */
export function collectedMidStage(handle: string): LeaseholdError {
  return new LeaseholdError(
    'ERR_UNAVAILABLE',
    `staged object ${handle} was collected before its write finished (the stage took longer than the collector's retention): stage again`,
  );
}
