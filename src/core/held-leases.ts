import type { AcquireAsk, ClientContext } from './client-context.js';
import { LeaseholdError } from './errors.js';
import { leaseIdPrefix } from './ids.js';
import type { LeaseHooks } from './lease-grant.js';
import { Lease } from './lease.js';
import type { ReleaseResult } from './results.js';
import type { StoreAcquireResult } from './store.js';
import type { Token } from './types.js';
import { LIMITS } from './validate.js';

/** A busy answer, as the store gives it and as a local holder is reported. */
export type BusyAnswer = Extract<StoreAcquireResult, { status: 'busy' }>;

/** The store lease a local successor acts under (decision 007). */
export interface UnderStoreLease {
  readonly storeToken: Token;
  readonly blockEnd: Token;
  readonly grantedAt: number;
}

/** Offers a releasing lease's key to a waiter of the same client; see {@link LeaseHooks.handOff}. */
export type HandOffOffer = (lease: Lease) => Promise<ReleaseResult> | (() => void) | undefined;

/**
 * The leases one client holds. A store grant becomes a {@link Lease} here and only here
 * ({@link admit}): the token is checked, a grant too late to leave any validity is refused,
 * and the `acquired` event is reported. A lease leaves when it is lost or released.
 */
export class HeldLeases {
  // An array in which each lease's entry knows its slot (swap-remove on settle). Not a
  // dictionary by lease id: a fresh lease id as a property key is internalised into V8's
  // string table (decision 035); not a Set: a long-lived V8 Set or Map with an add and
  // a delete per lease kept the deleted entries until it rehashed, so every lease survived
  // young-generation collections and was promoted.
  private readonly entries: HeldEntry[] = [];
  /** The live lease of this client on each key (a store has one holder per key). */
  private readonly byKey: Record<string, Lease> = Object.create(null) as Record<string, Lease>;

  /** @param offerHandOff consulted as each lease is released */
  constructor(
    private readonly ctx: ClientContext,
    readonly offerHandOff: HandOffOffer,
  ) {}

  /** Leases held right now. */
  list(): Lease[] {
    return this.entries.map((e) => e.lease);
  }

  /** This client's live lease on `key`, if any. */
  onKey(key: string): Lease | undefined {
    return this.byKey[key];
  }

  /**
   * Makes the Lease for a grant whose request was sent at `sentAt`, or undefined when the
   * answer came too late to leave any validity (the caller releases it). Throws
   * `ERR_PROTOCOL` for a token that is not a positive 64-bit integer.
   */
  admit(
    ask: AcquireAsk,
    leaseId: string,
    token: Token,
    sentAt: number,
    startedAt: number,
    under?: UnderStoreLease,
  ): Lease | undefined {
    const ctx = this.ctx;
    checkToken(ctx, token);
    const now = ctx.guard.now();
    if (now >= sentAt + ask.ttlMs - ask.driftMs) return undefined;
    const entry = new HeldEntry(this);
    const lease = new Lease(
      ctx,
      {
        key: ask.key,
        leaseId,
        token,
        // A store grant reserved `tokenBlock` tokens (the store checked they fit in int64).
        blockEnd:
          under?.blockEnd ?? (ctx.tokenBlock > 1 ? token + BigInt(ctx.tokenBlock - 1) : token),
        ...(under === undefined
          ? {}
          : { storeToken: under.storeToken, grantedAt: under.grantedAt }),
        value: ask.value,
        ttlMs: ask.ttlMs,
        driftMs: ask.driftMs,
        sentAt,
        renewEveryMs: ask.renewEveryMs,
      },
      entry,
    );
    entry.lease = lease;
    entry.slot = this.entries.length;
    this.entries.push(entry);
    this.byKey[ask.key] = lease;
    if (ctx.events.active) {
      ctx.events.emit({
        type: 'acquired',
        key: ask.key,
        ownerId: ctx.ownerId,
        token,
        leaseIdPrefix: leaseIdPrefix(leaseId),
        waitedMs: now - startedAt,
      });
    }
    if (ctx.debugLogs) {
      ctx.logger.debug(
        {
          ownerId: ctx.ownerId,
          key: ask.key,
          lease: leaseIdPrefix(leaseId),
          token: token.toString(),
        },
        'lease acquired',
      );
    }
    return lease;
  }

  /** Forgets a lease that ended. */
  remove(entry: HeldEntry): void {
    const slot = entry.slot;
    if (slot >= 0) {
      const last = this.entries.pop()!;
      if (last !== entry) {
        this.entries[slot] = last;
        last.slot = slot;
      }
      entry.slot = -1;
    }
    const lease = entry.lease;
    if (this.byKey[lease.key] === lease) delete this.byKey[lease.key];
  }
}

/** Throws `ERR_PROTOCOL` unless `token` is a positive 64-bit integer. */
export function checkToken(ctx: ClientContext, token: unknown): asserts token is Token {
  if (typeof token !== 'bigint' || token < 1n || token > LIMITS.maxToken) {
    throw new LeaseholdError(
      'ERR_PROTOCOL',
      `store ${ctx.store.kind} granted an invalid token ${String(token)}`,
    );
  }
}

/** One held lease's place in its registry; also the lease's hooks back into its client. */
class HeldEntry implements LeaseHooks {
  lease!: Lease;
  slot = -1;

  constructor(private readonly registry: HeldLeases) {}

  handOff(lease: Lease): Promise<ReleaseResult> | (() => void) | undefined {
    return this.registry.offerHandOff(lease);
  }

  settled(): void {
    this.registry.remove(this);
  }
}
