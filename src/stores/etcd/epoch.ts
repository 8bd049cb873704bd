import type { Etcd3, IOptions } from 'etcd3';
import { LeaseholdError } from '../../core/errors.js';
import { parseToken } from '../../core/validate.js';
import { epochFloor } from '../epoch-floor.js';
import { openEtcdClient } from './client.js';
import { decodeEntry, KeyLayout, prefixEnd } from './keys.js';
import type { Kv } from './queries.js';

/**
 * The fencing epoch of an etcd lease store.
 *
 * Tokens are `base + revision`, where revision is the holding entry's create revision and
 * `base` comes from the epoch record `NS + "\x01epoch"` (JSON `{base, floor, atMs}`; absent:
 * base 0, so tokens are plain revisions as before any epoch). Every transaction that grants
 * reads the record in the same transaction, and a grant counts only for an entry created
 * after the record was written (create revision > the record's mod revision); so
 * token = base + revision > base + (revision when the epoch was raised) = floor.
 *
 * After `etcdctl snapshot restore`, revisions restart at the snapshot's: without a new epoch
 * a grant repeats a token issued before. A store instance that lived through the restore
 * notices it (see {@link RestoreDetector}) and refuses to grant until `leasehold epoch` has
 * written a new record; a process started after the restore cannot tell, and there fences
 * reject every repeated token.
 */

/** The epoch as a grant read it: the base of its tokens and the record's mod revision. */
export interface EpochView {
  readonly base: bigint;
  /** The record's mod revision; entries created at or before it predate the epoch. */
  readonly rev: bigint;
  readonly floor: bigint;
  readonly atMs: bigint;
}

export const NO_EPOCH: EpochView = Object.freeze({ base: 0n, rev: 0n, floor: 0n, atMs: 0n });

/** The request op that reads the epoch record; appended last to every granting transaction. */
export function epochRangeOp(layout: KeyLayout): { request_range: { key: Buffer } } {
  return { request_range: { key: layout.epoch() } };
}

/** The epoch from the kvs of {@link epochRangeOp}'s response (none: {@link NO_EPOCH}). */
export function epochViewOf(kvs: readonly unknown[] | undefined): EpochView {
  const kv = kvs?.[0] as Kv | undefined;
  if (kv === undefined) return NO_EPOCH;
  try {
    const j = JSON.parse(kv.value.toString('utf8')) as {
      base?: unknown;
      floor?: unknown;
      atMs?: unknown;
    };
    if (typeof j.base === 'string' && typeof j.floor === 'string' && typeof j.atMs === 'string') {
      return {
        base: BigInt(j.base),
        floor: BigInt(j.floor),
        atMs: BigInt(j.atMs),
        rev: BigInt(kv.mod_revision),
      };
    }
  } catch {
    // fall through
  }
  throw new LeaseholdError(
    'ERR_PROTOCOL',
    `the etcd epoch record ${JSON.stringify(kv.key.toString('utf8'))} is not leasehold's; run \`leasehold epoch\` to rewrite it`,
  );
}

/** What a response header tells about the cluster. */
export interface Header {
  readonly cluster_id: string;
  readonly revision: string;
}

/**
 * Notices, within one store instance, that etcd went back in time: a response from another
 * cluster (a different cluster id), or a revision below one this instance had already seen
 * when it sent the request (a restore from a snapshot keeps the cluster id when restored with
 * the same member names and cluster token). Once noticed, grants are refused until an epoch
 * record newer than the revision at which it was noticed is read.
 *
 * Only a revision seen before the request was sent counts: linearizable requests never go
 * below that, but concurrent ones answer in any order — a transaction applied at revision 9
 * can be answered after one applied at 10, most often when they went to different members
 * (48 concurrent acquires of one store on a healthy 3-member cluster: 916 of 919 refused as a
 * restore when every earlier answer counted).
 */
export class RestoreDetector {
  private clusterId: string | undefined;
  private highest = 0n;
  private refused: { readonly at: bigint; readonly why: string } | undefined;

  /** The highest revision seen so far: take it just before sending a request, for {@link observe}. */
  get seen(): bigint {
    return this.highest;
  }

  /**
   * Records a header of a request sent when {@link seen} was `sentAt`; returns true when it
   * is the one that shows a restore.
   */
  observe(header: Header | undefined, sentAt: bigint): boolean {
    if (header === undefined) return false;
    const before = this.refused;
    const rev = BigInt(header.revision);
    if (this.clusterId !== undefined && header.cluster_id !== this.clusterId) {
      this.refuse(rev, `its cluster id changed from ${this.clusterId} to ${header.cluster_id}`);
      this.clusterId = header.cluster_id;
    } else if (rev < sentAt) {
      this.refuse(rev, `its revision went back from ${sentAt} to ${rev}`);
    }
    this.clusterId ??= header.cluster_id;
    if (rev > this.highest || this.refused !== undefined) this.highest = rev;
    return before === undefined && this.refused !== undefined;
  }

  private refuse(at: bigint, why: string): void {
    if (this.refused === undefined) this.refused = { at, why };
  }

  /** Whether grants are refused now. */
  get refusing(): boolean {
    return this.refused !== undefined;
  }

  /**
   * Throws `ERR_UNAVAILABLE` while refusing, unless `view` is an epoch written after the
   * restore was noticed, which lifts the refusal.
   */
  check(view: EpochView): void {
    if (this.refused === undefined) return;
    if (view.rev > this.refused.at) {
      this.refused = undefined;
      return;
    }
    throw new LeaseholdError(
      'ERR_UNAVAILABLE',
      `etcd was restored from a snapshot or replaced (${this.refused.why}): tokens granted now could repeat ones ` +
        'issued before. Grants are refused until the fencing epoch is raised: run `leasehold epoch --store etcd://…`',
    );
  }
}

/**
 * A store's side of the epoch: reads the header and epoch record of every transaction that
 * grants, and turns revisions into tokens.
 */
export class EpochGate {
  private readonly detector = new RestoreDetector();
  /** The epoch last read, for tokens reported outside a grant (holders, inspect). */
  latest: EpochView = NO_EPOCH;

  /** @param onRestore called once when a restore is noticed (the store ends its leases). */
  constructor(private readonly onRestore: () => void = () => undefined) {}

  /** The highest revision this store has seen: read it just before sending a transaction. */
  get sent(): bigint {
    return this.detector.seen;
  }

  /**
   * The epoch a granting transaction read (sent when {@link sent} was `sentAt`); throws
   * `ERR_UNAVAILABLE` while a restore this instance noticed has not been followed by a new
   * epoch.
   */
  admit(
    header: Header | undefined,
    kvs: readonly unknown[] | undefined,
    sentAt: bigint,
  ): EpochView {
    const view = this.see(header, kvs, sentAt);
    this.detector.check(view);
    return view;
  }

  /** Records what a read saw (never throws for a restore: reads do not grant). */
  see(header: Header | undefined, kvs: readonly unknown[] | undefined, sentAt: bigint): EpochView {
    const view = epochViewOf(kvs);
    if (this.detector.observe(header, sentAt)) this.onRestore();
    this.latest = view;
    return view;
  }
}

/** Options for {@link advanceEtcdFencingEpoch}. */
export interface EtcdEpochOptions {
  /** etcd client URLs. Give this or `client`. */
  readonly hosts?: readonly string[];
  /** A client to use instead of `hosts` (not closed). */
  readonly client?: Etcd3;
  /** More etcd3 client options (TLS, auth). */
  readonly clientOptions?: Omit<IOptions, 'hosts'>;
  /** The stores' namespace. Defaults to `''`. */
  readonly namespace?: string;
  /** A floor known from outside etcd, e.g. a fenced resource's high-water mark. */
  readonly atLeast?: bigint | string;
}

/** What {@link advanceEtcdFencingEpoch} did. */
export interface EtcdEpochReport {
  /** Every later grant gets a token greater than this. */
  readonly floor: bigint;
  /** leasehold entries deleted (their leases ended; etcdctl's and Go's entries are kept). */
  readonly rowsRaised: number;
}

/**
 * Advances the fencing epoch of an etcd lease store after the cluster was restored from a
 * snapshot: every later token exceeds every token issued before.
 *
 * With r0 the current revision and the previous record's base, the tokens still known are at
 * most base + r0; the floor F is {@link epochFloor} of this client's clock (etcd has none),
 * that, the previous floor carried forward and `atLeast`. The record {base: F − r0, floor: F}
 * is written; then every leasehold entry created before it is deleted (a restored lease is
 * not trusted; its holder's renewals fail). Later grants get base + revision > F. Running it
 * again is harmless. Throws `ERR_UNAVAILABLE` when etcd cannot be reached.
 */
export async function advanceEtcdFencingEpoch(options: EtcdEpochOptions): Promise<EtcdEpochReport> {
  const atLeast = options.atLeast === undefined ? 0n : parseToken(options.atLeast, 'atLeast');
  const client =
    options.client ??
    openEtcdClient(options.hosts ?? ['http://127.0.0.1:2379'], options.clientOptions);
  const layout = new KeyLayout(options.namespace ?? '');
  const deadline = (): { deadline: Date } => ({ deadline: new Date(Date.now() + 10_000) });
  try {
    const read = await client.kv.range({ key: layout.epoch() }, deadline());
    const previous = epochViewOf(read.kvs);
    const r0 = BigInt(read.header.revision);
    const nowMs = BigInt(Date.now());
    const floor = epochFloor({
      nowMs,
      highest: previous.base + r0,
      previous: [{ floor: previous.floor, atMs: previous.atMs }],
      atLeast,
    });
    const record = JSON.stringify({
      base: (floor - r0).toString(),
      floor: floor.toString(),
      atMs: nowMs.toString(),
    });
    const put = await client.kv.put(
      { key: layout.epoch(), value: Buffer.from(record) },
      deadline(),
    );
    const written = BigInt(put.header.revision);
    let rowsRaised = 0;
    const start = Buffer.from(layout.namespace, 'utf8');
    const end = prefixEnd(start);
    let from = start.length === 0 ? Buffer.from([0]) : start;
    for (;;) {
      const page = await client.kv.range(
        { key: from, range_end: end, limit: 500, max_create_revision: (written - 1n).toString() },
        deadline(),
      );
      const kvs = page.kvs as unknown as Kv[];
      for (const kv of kvs) {
        if (layout.parseEntry(kv.key) === undefined) continue;
        if ('foreign' in decodeEntry(kv.value.toString('utf8'))) continue;
        const del = await client.kv.txn(
          {
            compare: [
              {
                key: kv.key,
                target: 'Create',
                result: 'Equal',
                create_revision: kv.create_revision,
              },
            ],
            success: [{ request_delete_range: { key: kv.key } }],
            failure: [],
          },
          deadline(),
        );
        if (del.succeeded) rowsRaised++;
      }
      if (!page.more || kvs.length === 0) break;
      from = Buffer.concat([kvs[kvs.length - 1]!.key, Buffer.from([0])]);
    }
    return { floor, rowsRaised };
  } catch (err) {
    if (err instanceof LeaseholdError) throw err;
    throw new LeaseholdError(
      'ERR_UNAVAILABLE',
      `epoch: etcd did not raise the floor: ${String(err)}`,
      {
        cause: err,
      },
    );
  } finally {
    if (options.client === undefined) client.close();
  }
}
