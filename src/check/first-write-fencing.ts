import type { ClaimEvent, HistoryEvent, ResourceEvent } from '../history/events.js';
import { status, violation, type InvariantStatus, type Violation } from './report.js';

// I9, the first write fenced (claim before start, VERIFICATION.md): once a new owner's claim
// on a resource answered `applied`, no write with a lower token is applied there — even before
// the new owner's first write. I1 cannot see that case: the resource applied no newer write,
// so the stale write is not below anything it applied. The same walk counts the stale first
// writes that no claim could have stopped (the newer owner started without claiming there):
// the anomaly that claims exist for, reported as a figure, not as a violation.

/** Who owns which token of which key: from the clients' answered acquisitions. */
interface Owner {
  readonly key: string;
  readonly token: bigint;
  /** Its position in the history: the owner has started from here on (unless it claims). */
  readonly index: number;
}

export interface FirstWriteReport {
  readonly status: InvariantStatus;
  readonly violations: Violation[];
  readonly note?: string;
  /** Applied writes below a started newer owner's token, not below any applied token. */
  readonly staleFirstWrites: number;
  readonly claimsApplied: number;
}

const ownerId = (proc: string, token: string) => `${proc}\u0000${token}`;

/**
 * Walks the history in file order (a resource's `resource` and `claim` events are in its
 * commit order). A resource is fenced by the keys whose owners write to it (a write's proc
 * and token name the owner's acquisition). For each applied write with token t:
 * - below a token applied there before: I1's case, left to I1;
 * - below a token claimed there before: an I9 violation (and a stale first write);
 * - below the token of an owner of one of the resource's keys who had started without
 *   claiming there (its acquisition answered before the write; it made no claim on this
 *   resource): a stale first write, the unfenced-first-write anomaly.
 */
export function checkI9(events: readonly HistoryEvent[]): FirstWriteReport {
  const keyOf = new Map<string, string>();
  const owners: Owner[] = [];
  events.forEach((e, index) => {
    if (e.type === 'acquire' && e.phase === 'ok' && e.token !== undefined) {
      keyOf.set(ownerId(e.proc, e.token), e.key);
      owners.push({ key: e.key, token: BigInt(e.token), index });
    }
  });
  const keysOf = new Map<string, Set<string>>();
  const writeKey = new Map<string, string>();
  const claimedAt = new Map<string, Set<bigint>>();
  for (const e of events) {
    if (e.type === 'write' && e.phase === 'invoke') {
      const key = keyOf.get(ownerId(e.proc, e.token));
      if (key === undefined) continue;
      writeKey.set(e.op, key);
      let keys = keysOf.get(e.resource);
      if (keys === undefined) keysOf.set(e.resource, (keys = new Set()));
      keys.add(key);
    } else if (e.type === 'claim') {
      let tokens = claimedAt.get(e.resource);
      if (tokens === undefined) claimedAt.set(e.resource, (tokens = new Set()));
      tokens.add(BigInt(e.token));
    }
  }

  const violations: Violation[] = [];
  const applied = new Map<string, bigint>();
  const claimed = new Map<string, { token: bigint; event: ClaimEvent }>();
  let staleFirstWrites = 0;
  let claimsApplied = 0;
  events.forEach((e, index) => {
    if (e.type === 'claim') {
      if (e.action !== 'applied') return;
      claimsApplied++;
      const token = BigInt(e.token);
      const top = claimed.get(e.resource);
      if (top === undefined || token > top.token) claimed.set(e.resource, { token, event: e });
      return;
    }
    if (e.type !== 'resource' || e.action !== 'applied') return;
    const token = BigInt(e.token);
    const top = applied.get(e.resource);
    if (top !== undefined && token < top) return; // I1's case
    applied.set(e.resource, top === undefined || token > top ? token : top);
    const claim = claimed.get(e.resource);
    if (claim !== undefined && token < claim.token) {
      staleFirstWrites++;
      violations.push(
        violation(
          'I9',
          `resource ${e.resource} applied token ${token} after token ${claim.token} was claimed there (before that owner's first write)`,
          claim.event,
          e,
        ),
      );
      return;
    }
    if (startedUnclaimedAbove(e, token, index, owners, keysOf, claimedAt)) staleFirstWrites++;
  });
  const claims = events.some((e) => e.type === 'claim');
  return {
    status: claims ? status(violations) : 'not_checked',
    violations,
    ...(claims ? {} : { note: 'no claims in the history' }),
    staleFirstWrites,
    claimsApplied,
  };
}

/** A newer owner of one of the resource's keys had started before `index`, without claiming there. */
function startedUnclaimedAbove(
  e: ResourceEvent,
  token: bigint,
  index: number,
  owners: readonly Owner[],
  keysOf: ReadonlyMap<string, ReadonlySet<string>>,
  claimedAt: ReadonlyMap<string, ReadonlySet<bigint>>,
): boolean {
  const keys = keysOf.get(e.resource);
  if (keys === undefined) return false;
  const claimedHere = claimedAt.get(e.resource);
  for (const o of owners) {
    if (o.index >= index) break; // owners are in history order
    if (o.token > token && keys.has(o.key) && claimedHere?.has(o.token) !== true) return true;
  }
  return false;
}
