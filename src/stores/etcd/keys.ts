import { leaseIdPrefix } from '../../core/ids.js';
import type { HolderInfo } from '../../core/types.js';

/**
 * The etcd key layout, shared with etcd's own concurrency recipes (`client/v3/concurrency`):
 *
 * - `NS + KEY + "/" + hex(etcd lease id)`: one entry per contender, attached to its owner's
 *   etcd lease. The entry with the lowest create revision holds KEY. `etcdctl lock KEY` and
 *   `etcdctl elect KEY` write exactly these entries (`Mutex`/`Election` with prefix `KEY/`),
 *   so leasehold, `etcdctl` and Go programs using `concurrency.NewMutex` exclude each other.
 * - `NS + "\x01last/" + KEY`: the create revision of the last grant leasehold made on KEY
 *   (its mod revision, or its value when written after the grant). It survives release and
 *   expiry, so `inspect` can report the last token. `\x01` cannot occur in a leasehold key.
 * - `NS + "\x01epoch"`: the fencing epoch record (epoch.ts); tokens are its base + revision.
 */

/** Marks a value written by leasehold, to tell it from an `etcdctl lock` (empty) or `elect` (proposal) value. */
const MARK = 'leasehold:1:';

/** What leasehold stores in its contender entry. */
export interface EntryValue {
  readonly ownerId: string;
  readonly leaseId: string;
  readonly value: string | undefined;
  /** The requested TTL in ms, so observers can report the part the holder was promised. */
  readonly ttlMs: number;
  /** How much longer than `ttlMs` the shared session may keep the entry, in ms. */
  readonly headroomMs: number;
}

export function encodeEntry(v: EntryValue): string {
  return (
    MARK + JSON.stringify({ o: v.ownerId, l: v.leaseId, v: v.value, t: v.ttlMs, h: v.headroomMs })
  );
}

/** Decodes an entry value; foreign entries (etcdctl, Go `concurrency`) come back as `foreign`. */
export function decodeEntry(raw: string): EntryValue | { readonly foreign: string } {
  if (!raw.startsWith(MARK)) return { foreign: raw };
  try {
    const j = JSON.parse(raw.slice(MARK.length)) as {
      o?: unknown;
      l?: unknown;
      v?: unknown;
      t?: unknown;
      h?: unknown;
    };
    if (typeof j.o === 'string' && typeof j.l === 'string') {
      return {
        ownerId: j.o,
        leaseId: j.l,
        value: typeof j.v === 'string' ? j.v : undefined,
        ttlMs: typeof j.t === 'number' ? j.t : 0,
        headroomMs: typeof j.h === 'number' ? j.h : 0,
      };
    }
  } catch {
    // fall through: an unreadable value is treated as foreign
  }
  return { foreign: raw };
}

/** Key layout of one store namespace. */
export class KeyLayout {
  constructor(readonly namespace: string) {}

  /** The contender directory of `key`: every entry under it competes for `key`. */
  dir(key: string): Buffer {
    return Buffer.from(`${this.namespace}${key}/`, 'utf8');
  }

  entry(key: string, sessionHex: string): Buffer {
    return Buffer.from(`${this.namespace}${key}/${sessionHex}`, 'utf8');
  }

  last(key: string): Buffer {
    return Buffer.from(`${this.namespace}\u0001last/${key}`, 'utf8');
  }

  /** The fencing epoch record (see epoch.ts). */
  epoch(): Buffer {
    return Buffer.from(`${this.namespace}\u0001epoch`, 'utf8');
  }

  /** Splits an etcd key into (leasehold key, lease hex) when it is a contender entry in this namespace. */
  parseEntry(raw: Buffer | string): { key: string; hex: string } | undefined {
    const s = typeof raw === 'string' ? raw : raw.toString('utf8');
    if (!s.startsWith(this.namespace)) return undefined;
    const rest = s.slice(this.namespace.length);
    if (rest.startsWith('\u0001')) return undefined;
    const slash = rest.lastIndexOf('/');
    if (slash <= 0) return undefined;
    const hex = rest.slice(slash + 1);
    if (!/^[0-9a-f]{1,16}$/.test(hex)) return undefined;
    return { key: rest.slice(0, slash), hex };
  }
}

/** The exclusive end of the range of keys starting with `prefix` (etcd's `WithPrefix`). */
export function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i] = end[i]! + 1;
      return end.subarray(0, i + 1);
    }
  }
  // All 0xff (or empty): to the end of the keyspace.
  return Buffer.from([0]);
}

/** etcd's `%x` of a lease id, as `concurrency.Mutex` names its entries. */
export function leaseHex(id: string): string {
  return BigInt(id).toString(16);
}

/** Holder information for an entry, leasehold's or foreign. */
export function holderFromEntry(
  raw: string,
  hex: string,
  storeRemainingMs: number,
  token: bigint,
): HolderInfo {
  const d = decodeEntry(raw);
  if ('foreign' in d) {
    return {
      ownerId: `etcd-lease/${hex}`,
      token,
      remainingMs: Math.max(1, storeRemainingMs),
      leaseIdPrefix: hex.slice(0, 8),
      value: d.foreign === '' ? undefined : d.foreign,
    };
  }
  // The shared session may keep the entry `headroomMs` longer than the holder asked; report
  // the part the holder was promised (never below 1 while the entry exists).
  const remaining = Math.min(storeRemainingMs - d.headroomMs, d.ttlMs);
  return {
    ownerId: d.ownerId,
    token,
    remainingMs: Math.max(1, remaining),
    leaseIdPrefix: leaseIdPrefix(d.leaseId),
    value: d.value,
  };
}
