import { leaseIdPrefix } from './ids.js';
import type { ClientContext } from './client-context.js';
import { invalidArgument, LeaseholdError } from './errors.js';
import type { Lease } from './lease.js';
import type {
  AcquireResult,
  ClaimFailedResult,
  ClaimResult,
  FencedAcquireResult,
} from './results.js';
import { boundedRequest, isProgrammerError, type Settled } from './runtime/request.js';
import type { Token } from './types.js';
import { validateKey } from './validate.js';

// Claim before start (DESIGN §4, seed 000 §2): an acquisition that names fences installs its
// token on each of them before the lease is handed over, so a stale owner's write is refused
// there even before the new owner's first write (invariant I9). Core knows a fence only by the
// structural ClaimTarget below: every fence of `leasehold/fencing/*` and the gateway's claim
// client fit it, and core imports none of them (the layer rule).

/**
 * Anything that can install a generation at a resource: `claim(scope, token)` raises the
 * scope's mark so that every token below `token` is refused there, with no domain write, and
 * answers a {@link ClaimResult}. `PostgresFence`, `RedisFence`, `SqliteFence`, `HttpFence`,
 * the mark stores' fences and `GatewayClaimClient` all fit. It may answer synchronously
 * (SQLite) or with a promise; it throws for an unreachable fence.
 */
export interface ClaimTarget {
  claim(scope: string, token: Token): ClaimResult | PromiseLike<ClaimResult>;
}

/**
 * One fence an acquisition claims on (`acquire(key, { fences: [{ fence, scope }] })`). A
 * fence serves many scopes, so the scope goes with the entry rather than into the fence.
 */
export interface FenceClaim {
  /** The fence: any {@link ClaimTarget}. */
  readonly fence: ClaimTarget;
  /** The scope at that fence (same rules as a lease key). Defaults to the lease's key. */
  readonly scope?: string;
  /** A name for the `claim_failed` result and logs (e.g. `'reports-db'`). Defaults to none. */
  readonly name?: string;
}

/** A checked {@link FenceClaim} of one acquisition, its scope filled in. */
export interface ResolvedClaim {
  readonly fence: ClaimTarget;
  readonly scope: string;
  readonly name: string | undefined;
}

/** The most fences one acquisition may claim on. */
export const MAX_FENCE_CLAIMS = 16;

/**
 * Checks the `fences` option of one acquisition; undefined when it names none. Throws
 * `ERR_INVALID_ARGUMENT` naming the entry and the rule.
 */
export function resolveFences(value: unknown, key: string): readonly ResolvedClaim[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_FENCE_CLAIMS)
    throw invalidArgument(
      'fences',
      `must be a list of 1 to ${MAX_FENCE_CLAIMS} { fence, scope } entries`,
      value,
    );
  return value.map((entry: unknown, i): ResolvedClaim => {
    const e = entry as Partial<FenceClaim> | null | undefined;
    if (typeof e !== 'object' || e === null || typeof e.fence?.claim !== 'function')
      throw invalidArgument(`fences[${i}].fence`, 'must have a claim(scope, token) method', e);
    const name = e.name;
    if (name !== undefined && (typeof name !== 'string' || name === '' || name.length > 128))
      throw invalidArgument(`fences[${i}].name`, 'must be 1 to 128 characters', name);
    const scope = e.scope === undefined ? key : validateKey(e.scope, `fences[${i}].scope`);
    return { fence: e.fence, scope, name };
  });
}

/**
 * Claims `lease.token` on every fence of `claims`, all at once, each bounded by the client's
 * request timeout and the lease's validity left. All `applied`: the acquisition's result as
 * it was. Otherwise the lease is released (awaited) and the answer is `claim_failed`, naming
 * the first entry (by index) that refused or could not be reached. Throws a fence's
 * programmer error (`ERR_INVALID_ARGUMENT`) after releasing, and the abort error when
 * `signal` fires.
 */
export async function claimFences(
  ctx: ClientContext,
  acquired: Extract<AcquireResult, { status: 'acquired' }>,
  claims: readonly ResolvedClaim[],
  signal: AbortSignal,
): Promise<FencedAcquireResult> {
  const { lease } = acquired;
  const boundMs = Math.max(1, Math.min(ctx.requestTimeoutMs, lease.deadline - ctx.guard.now()));
  const settled = await Promise.all(
    claims.map((c) =>
      boundedRequest<ClaimResult>(ctx.timeouts, boundMs, signal, async () =>
        c.fence.claim(c.scope, lease.token),
      ),
    ),
  );
  let failed: ClaimFailedResult | undefined;
  for (let i = 0; i < settled.length && failed === undefined; i++) {
    failed = failureOf(settled[i]!, claims[i]!, i, lease, signal, ctx);
  }
  if (failed === undefined) {
    if (lease.isValid()) return acquired;
    // Every fence answered in time, but the lease ended meanwhile (lost at the store): no
    // fence is to blame, and there is no lease to hand over.
    await lease.release();
    return { status: 'unavailable', cause: expiredWhileClaiming(lease) };
  }
  ctx.logger.warn(
    {
      ownerId: lease.ownerId,
      key: lease.key,
      lease: leaseIdPrefix(lease.leaseId),
      token: lease.token.toString(),
      fence: failed.name ?? failed.fence,
      scope: failed.scope,
      reason: failed.reason,
    },
    'claim failed; releasing the new lease',
  );
  await lease.release();
  const thrown = settled.find(
    (s): s is Extract<Settled<ClaimResult>, { ok: false }> =>
      !s.ok && (s.aborted || isProgrammerError(s.error)),
  );
  if (thrown !== undefined) throw thrown.aborted ? ctx.abortError(signal) : thrown.error;
  return failed;
}

function failureOf(
  s: Settled<ClaimResult>,
  claim: ResolvedClaim,
  index: number,
  lease: Lease,
  signal: AbortSignal,
  ctx: ClientContext,
): ClaimFailedResult | undefined {
  if (!s.ok) {
    const cause = s.timedOut
      ? new LeaseholdError(
          'ERR_UNAVAILABLE',
          `the claim on ${claim.name ?? `fences[${index}]`} did not answer within the lease's validity or the request timeout`,
        )
      : s.aborted
        ? ctx.abortError(signal)
        : s.error;
    return unavailable(index, claim, lease, cause);
  }
  const r = s.value;
  if (r?.status === 'applied') return undefined;
  if (r?.status === 'stale_fence')
    return claimFailed(index, claim, lease, {
      reason: 'stale_fence',
      highWaterMark: r.highWaterMark,
    });
  return unavailable(
    index,
    claim,
    lease,
    new LeaseholdError(
      'ERR_PROTOCOL',
      `unexpected claim answer ${String((r as { status?: unknown } | undefined)?.status)}`,
    ),
  );
}

function unavailable(
  index: number,
  claim: ResolvedClaim,
  lease: Lease,
  cause: unknown,
): ClaimFailedResult {
  return claimFailed(index, claim, lease, { reason: 'unavailable', cause });
}

function claimFailed(
  index: number,
  claim: ResolvedClaim,
  lease: Lease,
  why:
    | { readonly reason: 'stale_fence'; readonly highWaterMark: bigint }
    | { readonly reason: 'unavailable'; readonly cause: unknown },
): ClaimFailedResult {
  const { name, scope } = claim;
  return { status: 'claim_failed', fence: index, name, scope, token: lease.token, ...why };
}

function expiredWhileClaiming(lease: Lease): LeaseholdError {
  return new LeaseholdError(
    'ERR_LEASE_LOST',
    `lease on ${lease.key} (token ${lease.token}) ended while its fences were claimed`,
  );
}
