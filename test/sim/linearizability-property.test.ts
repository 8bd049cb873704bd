import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { MemoryLeaseStore } from '../../src/stores/memory/store.js';
import type { StoreOpEvent } from '../../src/history/events.js';
import { checkLinearizability } from '../../src/check/linearizability.js';

// Property: a sequential execution of a real store (the memory store on a virtual clock),
// recorded with windows widened around each operation's true instant and some answers lost,
// is always accepted; the same execution with one answer changed to an impossible one (exact
// windows) is always rejected. Grants ask for token blocks of 1 to 4 (decision 007), so lost
// grants with blocks, retries and hand-offs with blocks are in the accepted histories, and a
// new grant given the top of the last block is among the rejected ones.

const opts = { timeoutMs: 1000, signal: new AbortController().signal };
const json = (v: unknown) =>
  JSON.stringify(v, (_, x: unknown) => (typeof x === 'bigint' ? x.toString() : x));
type Kind =
  | 'acquire'
  | 'retry'
  | 'renew'
  | 'release'
  | 'stale_renew'
  | 'stale_release'
  | 'hand_off'
  | 'stale_hand_off';

interface Step {
  readonly gap: number;
  readonly proc: number;
  readonly kind: Kind;
  readonly ttl: number;
  /** The token block a grant asks for (1: none). */
  readonly block: number;
}

/** One executed store operation: its true store instant, request and answer. */
interface Executed {
  readonly at: number;
  readonly proc: string;
  readonly f: StoreOpEvent['f'];
  readonly lease: string;
  readonly token?: string;
  readonly ttlMs?: number;
  /** Acquire/hand_off: the token block asked for, when above 1. */
  readonly tokenBlock?: number;
  readonly answer: 'acquired' | 'busy' | 'renewed' | 'lost' | 'released' | 'not_owner';
  readonly granted?: string;
  /** Hand_off: the lease it releases, its token, and what the release answered. */
  readonly releaseLease?: string;
  readonly releaseToken?: string;
  readonly released?: 'released' | 'not_owner';
  /** Acquire/hand_off: a new grant (not an idempotent retry). Release: the lease was live. */
  readonly fresh: boolean;
  /** Largest token granted before this operation (0 if none). */
  readonly maxBefore: bigint;
  /** Largest token granted or reserved (top of a block) before this operation (0 if none). */
  readonly topBefore: bigint;
}

const stepArb = fc.record({
  gap: fc.integer({ min: 1, max: 120 }),
  proc: fc.integer({ min: 0, max: 2 }),
  kind: fc.constantFrom<Kind>(
    'acquire',
    'acquire',
    'retry',
    'renew',
    'release',
    'stale_renew',
    'stale_release',
    'hand_off',
    'stale_hand_off',
  ),
  ttl: fc.integer({ min: 20, max: 300 }),
  block: fc.constantFrom(1, 1, 2, 4),
});

/** Runs the steps against the memory store, one at a time, at increasing store times. */
async function execute(steps: readonly Step[]): Promise<Executed[]> {
  const clock = new ManualClock({ startMs: 0 });
  const store = new MemoryLeaseStore({ clock });
  const held = new Map<number, { lease: string; token: bigint; ttl: number }>();
  const stale = new Map<number, { lease: string; token: bigint; ttl: number }>();
  // Mirror of the holder, to know whether a release found its lease live.
  let holder: { lease: string; expiresAt: number } | undefined;
  let leases = 0;
  let max = 0n;
  let top = 0n;
  const out: Executed[] = [];
  for (const s of steps) {
    await clock.advance(s.gap);
    const at = clock.now();
    const proc = `p${s.proc}`;
    const mine = held.get(s.proc);
    const old = stale.get(s.proc);
    const base = { at, proc, maxBefore: max, topBefore: top };
    const block = s.block > 1 ? { tokenBlock: s.block } : {};
    if (s.kind === 'acquire' || (s.kind === 'retry' && mine !== undefined)) {
      const retry = s.kind === 'retry' && mine !== undefined;
      const lease = retry ? mine.lease : `L${++leases}`;
      const ttl = retry ? mine.ttl : s.ttl;
      const r = await store.tryAcquire(
        { key: 'k', leaseId: lease, ownerId: proc, ttlMs: ttl, value: undefined, ...block },
        opts,
      );
      const fresh = r.status === 'acquired' && r.token > max;
      if (r.status === 'acquired') {
        if (fresh) holder = { lease, expiresAt: at + ttl };
        // A retry reserves nothing more.
        if (fresh) top = r.token + BigInt(s.block - 1);
        max = r.token > max ? r.token : max;
        if (mine !== undefined && !retry) stale.set(s.proc, mine);
        held.set(s.proc, { lease, token: r.token, ttl });
      }
      out.push({
        ...base,
        f: 'acquire',
        lease,
        ttlMs: ttl,
        ...block,
        answer: r.status,
        ...(r.status === 'acquired' ? { granted: r.token.toString() } : {}),
        fresh,
      });
    } else if ((s.kind === 'hand_off' && mine) || (s.kind === 'stale_hand_off' && old)) {
      const l = s.kind === 'hand_off' ? mine! : old!;
      const lease = `L${++leases}`;
      const r = await store.releaseAndAcquire(
        { key: 'k', leaseId: l.lease, token: l.token },
        { key: 'k', leaseId: lease, ownerId: proc, ttlMs: s.ttl, value: undefined, ...block },
        opts,
      );
      const a = r.acquired;
      const fresh = a.status === 'acquired' && a.token > max;
      if (a.status === 'acquired') {
        holder = { lease, expiresAt: at + s.ttl };
        max = a.token;
        top = a.token + BigInt(s.block - 1);
        if (mine !== undefined) stale.set(s.proc, mine);
        held.set(s.proc, { lease, token: a.token, ttl: s.ttl });
      } else if (r.released === 'released') holder = undefined;
      out.push({
        ...base,
        f: 'hand_off',
        lease,
        ttlMs: s.ttl,
        ...block,
        releaseLease: l.lease,
        releaseToken: l.token.toString(),
        released: r.released,
        answer: a.status,
        ...(a.status === 'acquired' ? { granted: a.token.toString() } : {}),
        fresh,
      });
    } else if ((s.kind === 'renew' && mine) || (s.kind === 'stale_renew' && old)) {
      const l = s.kind === 'renew' ? mine! : old!;
      const r = await store.renew(
        { key: 'k', leaseId: l.lease, token: l.token, ttlMs: l.ttl },
        opts,
      );
      if (r.status === 'renewed') holder = { lease: l.lease, expiresAt: at + l.ttl };
      out.push({
        ...base,
        f: 'renew',
        lease: l.lease,
        token: l.token.toString(),
        ttlMs: l.ttl,
        answer: r.status,
        fresh: false,
      });
    } else if ((s.kind === 'release' && mine) || (s.kind === 'stale_release' && old)) {
      const l = s.kind === 'release' ? mine! : old!;
      const live = holder !== undefined && holder.lease === l.lease && holder.expiresAt > at;
      const r = await store.release({ key: 'k', leaseId: l.lease, token: l.token }, opts);
      if (r.status === 'released') holder = undefined;
      if (s.kind === 'release') {
        held.delete(s.proc);
        stale.set(s.proc, l);
      }
      out.push({
        ...base,
        f: 'release',
        lease: l.lease,
        token: l.token.toString(),
        answer: r.status,
        fresh: live,
      });
    }
  }
  return out;
}

/** The history of an execution: windows [at − before, at + after], store clock = t + 1000. */
function record(
  ops: readonly Executed[],
  widen: (i: number) => readonly [number, number],
  lost: (i: number) => boolean,
  answer: (i: number) => Pick<StoreOpEvent, 'phase' | 'token' | 'released'> | undefined = () =>
    undefined,
): StoreOpEvent[] {
  const events: StoreOpEvent[] = [];
  ops.forEach((o, i) => {
    const [before, after] = widen(i);
    const base = { type: 'store_op', f: o.f, proc: o.proc, op: `o${i}`, key: 'k' } as const;
    events.push({
      ...base,
      phase: 'invoke',
      t: o.at - before,
      lease: o.lease,
      ...(o.token === undefined ? {} : { token: o.token }),
      ...(o.ttlMs === undefined ? {} : { ttlMs: o.ttlMs }),
      ...(o.tokenBlock === undefined ? {} : { tokenBlock: o.tokenBlock }),
      ...(o.releaseLease === undefined
        ? {}
        : { releaseLease: o.releaseLease, releaseToken: o.releaseToken }),
      storeAt: o.at - before + 1000,
    });
    if (lost(i)) return;
    events.push({
      ...base,
      t: o.at + after,
      storeAt: o.at + after + 1000,
      ...(answer(i) ?? {
        phase: o.answer,
        ...(o.granted === undefined ? {} : { token: o.granted }),
        ...(o.released === undefined ? {} : { released: o.released }),
      }),
    });
  });
  return events.sort((a, b) => a.t - b.t);
}

/** An answer the model cannot give at that instant, or undefined when none is certain. */
function impossible(o: Executed): Pick<StoreOpEvent, 'phase' | 'token' | 'released'> | undefined {
  if (o.f === 'hand_off') {
    // Busy right after one's own release freed the key (the halves are one step), or the
    // released token granted again — each on about half of the hand-offs.
    const busy = o.released === 'released' && (o.granted === undefined || BigInt(o.granted) % 2n);
    if (busy) return { phase: 'busy', released: 'released' };
    // The top of the last grant's block: reserved, never grantable again.
    if (o.answer === 'acquired' && o.fresh && o.topBefore > 0n)
      return { phase: 'acquired', token: o.topBefore.toString(), released: o.released };
    return undefined;
  }
  switch (o.answer) {
    case 'acquired':
      // A new grant at the top of the last grant's block (or below); a free (or own) key
      // answered busy.
      return o.fresh && o.topBefore > 0n
        ? { phase: 'acquired', token: o.topBefore.toString() }
        : { phase: 'busy' };
    case 'busy':
      return { phase: 'acquired', token: (o.topBefore + 100n).toString() };
    case 'renewed':
      return { phase: 'lost' };
    case 'lost':
      return { phase: 'renewed' };
    case 'released':
      return o.fresh ? { phase: 'not_owner' } : undefined;
    case 'not_owner':
      return { phase: 'released' };
  }
}

describe('I5 checker against sequential executions of the memory store (fast-check)', () => {
  it('accepts every execution, with concurrency widened around each instant and answers lost', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(stepArb, { minLength: 1, maxLength: 40 }),
        fc.array(fc.tuple(fc.nat(150), fc.nat(150), fc.nat(9)), { minLength: 40, maxLength: 40 }),
        fc.array(fc.nat(30), { maxLength: 4 }),
        async (steps, shape, ghosts) => {
          const ops = await execute(steps);
          fc.pre(ops.length > 0);
          const events = record(
            ops,
            (i) => [shape[i]![0], shape[i]![1]],
            (i) => shape[i]![2] === 0,
          );
          // :info requests that never reached the store are allowed too.
          ghosts.forEach((g, j) =>
            events.push({
              type: 'store_op',
              phase: 'invoke',
              f: 'acquire',
              t: g * 10,
              proc: 'ghost',
              op: `g${j}`,
              key: 'k',
              lease: `G${j}`,
              ttlMs: 50,
              storeAt: g * 10 + 1000,
            }),
          );
          events.sort((a, b) => a.t - b.t);
          const r = checkLinearizability(events, { initialHolder: 'none' });
          assert.equal(r.status, 'ok', json({ ops, r }));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('rejects the same execution with one answer changed to an impossible one', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(stepArb, { minLength: 1, maxLength: 40 }),
        fc.nat(),
        async (steps, pick) => {
          const ops = await execute(steps);
          const candidates = ops.map((o, i) => i).filter((i) => impossible(ops[i]!) !== undefined);
          fc.pre(candidates.length > 0);
          const target = candidates[pick % candidates.length]!;
          const exact = () => [0, 0] as const;
          const never = () => false;
          // Exact instants: the unmutated history is accepted, the mutated one rejected.
          const clean = checkLinearizability(record(ops, exact, never), { initialHolder: 'none' });
          assert.equal(clean.status, 'ok');
          const mutated = record(ops, exact, never, (i) =>
            i === target ? impossible(ops[i]!) : undefined,
          );
          const r = checkLinearizability(mutated, { initialHolder: 'none' });
          assert.equal(r.status, 'violated', json({ target, op: ops[target], ops }));
        },
      ),
      { numRuns: 300 },
    );
  });
});
