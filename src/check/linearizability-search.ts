/**
 * The Wing & Gong search with Lowe's memoisation over one key's operations (see
 * linearizability.ts), stepping the fenced mutex model of mutex-model.ts.
 */
import type { LeaseOp } from './linearizability.js';
import { isBusy, type ModelState, NO_LEASE, type SearchOp, step } from './mutex-model.js';

type SearchStatus = 'ok' | 'violated' | 'unknown';

export interface SearchOutcome {
  readonly status: SearchStatus;
  readonly steps: number;
  /** Model refusals per operation index (a few distinct reasons each). */
  readonly reasons: Map<number, string[]>;
}

/**
 * WGL over one key's operations. `ops[i].outcome === 'info'` ops may stay out; all others
 * must be linearized.
 */
export function search(
  ops: readonly SearchOp[],
  names: readonly string[],
  init: ModelState,
  budget: number,
): SearchOutcome {
  const n = ops.length;
  const reasons = new Map<number, string[]>();
  // Entries: the call of each operation and its return (none for :info), sorted by time, as a
  // doubly linked list over indices; node 0 is the head, node k + 1 is entries[k].
  const entries: { id: number; ret: boolean; t: number }[] = [];
  let required = 0;
  for (let i = 0; i < n; i++) {
    entries.push({ id: i, ret: false, t: ops[i]!.src.invokeT });
    if (ops[i]!.outcome !== 'info') {
      entries.push({ id: i, ret: true, t: ops[i]!.src.completeT });
      required++;
    }
  }
  // Calls before returns at equal times: operations that touch in time count as concurrent.
  entries.sort((a, b) => a.t - b.t || Number(a.ret) - Number(b.ret) || a.id - b.id);
  const size = entries.length + 1;
  const next = new Int32Array(size + 1).fill(-1);
  const prev = new Int32Array(size + 1).fill(-1);
  const callNode = new Int32Array(n);
  const retNode = new Int32Array(n).fill(-1);
  for (let k = 0; k < entries.length; k++) {
    const node = k + 1;
    const e = entries[k]!;
    if (e.ret) retNode[e.id] = node;
    else callNode[e.id] = node;
    prev[node] = node - 1;
    next[node - 1] = node;
  }
  next[entries.length] = -1;
  const isRet = (node: number) => entries[node - 1]!.ret;
  const idOf = (node: number) => entries[node - 1]!.id;
  const unlink = (node: number) => {
    next[prev[node]!] = next[node]!;
    if (next[node]! !== -1) prev[next[node]!] = prev[node]!;
  };
  const relink = (node: number) => {
    next[prev[node]!] = node;
    if (next[node]! !== -1) prev[next[node]!] = node;
  };
  // How many operations not linearized yet name each lease (as theirs, or as the one a
  // hand-off releases). A lease at 0 can never be renewed, released, retried or handed off
  // again: which lease it is no longer matters to the rest of the search.
  const mentionsLeft = new Int32Array(names.length);
  const mention = (i: number, by: number) => {
    const o = ops[i]!;
    mentionsLeft[o.lease]! += by;
    if (o.releaseLease !== NO_LEASE) mentionsLeft[o.releaseLease]! += by;
  };
  for (let i = 0; i < n; i++) mention(i, 1);
  // Lift in order call-then-return, restore in reverse (dancing links).
  const lift = (i: number) => {
    unlink(callNode[i]!);
    if (retNode[i]! !== -1) unlink(retNode[i]!);
    mention(i, -1);
  };
  const unlift = (i: number) => {
    mention(i, 1);
    if (retNode[i]! !== -1) relink(retNode[i]!);
    relink(callNode[i]!);
  };
  // :info operations with the same effect are interchangeable, so only the earliest-invoked
  // unlinearized one of each kind is a candidate (its window contains the others'): any
  // linearization using a later one can use it instead (the exchange keeps every operation
  // inside its window, taking them in invocation order). Same kind: same function, lease, token,
  // TTL and token block — or any acquire of a lease no other operation still to be linearized
  // mentions (a grant nobody can ever renew, release or retry), with the same TTL and token
  // block (the block is part of a grant's effect: it raises the floor); a hand-off is such an
  // acquire too once the lease it releases is neither the holder nor mentioned again (its
  // release can only answer not_owner). Without this, k lost acquires cost k! orders.
  const sameEffect = infoKinds(ops);
  const kindOf = (id: number, holder: number): string => {
    const o = ops[id]!;
    const anonymous =
      mentionsLeft[o.lease] === 1 &&
      (o.src.f === 'acquire' ||
        (o.src.f === 'hand_off' &&
          mentionsLeft[o.releaseLease] === 1 &&
          holder !== o.releaseLease));
    return anonymous ? `anonymous acquire/${o.src.ttlMs}/${o.block}` : sameEffect[id]!;
  };
  const candidates = (at: ModelState): number[] => {
    const holder = at.holder;
    const done: number[] = [];
    const info: number[] = [];
    // Kind → smallest store-time lower bound among the ones kept (list order is invocation
    // order; a later one is dominated only if its store window starts no earlier either).
    const kinds = new Map<string, number>();
    for (let node = next[0]!; node !== -1 && !isRet(node); node = next[node]!) {
      const id = idOf(node);
      const o = ops[id]!;
      if (o.outcome !== 'info') {
        done.push(id);
        continue;
      }
      // An :info renewal or release of token t can never match once a grant above t is
      // linearized (tokens only grow): trying it at every node would only spend the budget.
      if (
        (o.src.f === 'renew' || o.src.f === 'release') &&
        o.src.token! <= at.token &&
        (o.src.token! < at.token || !at.exact)
      )
        continue;
      const kind = kindOf(id, holder);
      const kept = kinds.get(kind);
      if (kept !== undefined && kept <= o.src.storeLo) continue;
      kinds.set(kind, Math.min(kept ?? Infinity, o.src.storeLo));
      info.push(id);
    }
    return info.length === 0 ? done : done.concat(info);
  };

  const bits = new Uint16Array(Math.ceil(n / 16) + 1);
  const bitsKey = () => String.fromCharCode(...bits);
  const seen = new Set<string>();
  interface Frame {
    readonly state: ModelState;
    readonly cands: number[];
    ci: number;
    succ: ModelState[];
    si: number;
    /** The op linearized to reach this frame (-1 at the root). */
    readonly via: number;
  }
  const stack: Frame[] = [
    { state: init, cands: candidates(init), ci: -1, succ: [], si: 0, via: -1 },
  ];
  let left = required;
  let steps = 0;
  const note = (i: number, reason: string) => {
    const list = reasons.get(i) ?? [];
    if (list.length < 3 && !list.includes(reason)) list.push(reason);
    reasons.set(i, list);
  };
  while (stack.length > 0) {
    if (left === 0) return { status: 'ok', steps, reasons };
    const frame = stack[stack.length - 1]!;
    let child: ModelState | undefined;
    let childOp = -1;
    while (child === undefined) {
      if (frame.si < frame.succ.length) {
        child = frame.succ[frame.si++]!;
        childOp = frame.cands[frame.ci]!;
        break;
      }
      frame.ci++;
      if (frame.ci >= frame.cands.length) break;
      if (++steps > budget) return { status: 'unknown', steps, reasons };
      const op = frame.cands[frame.ci]!;
      if (frame.via >= 0 && swappable(ops[frame.via]!, frame.via, ops[op]!, op)) continue;
      const r = step(frame.state, ops[op]!, names);
      if (r.next.length === 0 && r.reason !== undefined) note(op, r.reason);
      frame.succ = r.next;
      frame.si = 0;
    }
    if (child === undefined) {
      // Every candidate tried: backtrack.
      stack.pop();
      if (frame.via >= 0) {
        bits[frame.via >> 4]! &= ~(1 << (frame.via & 15));
        unlift(frame.via);
        if (ops[frame.via]!.outcome !== 'info') left++;
      }
      continue;
    }
    bits[childOp >> 4]! |= 1 << (childOp & 15);
    lift(childOp);
    // States that differ only in which forgotten lease holds the key are the same state. A
    // frame reached by a busy answer also skips some candidates (`swappable`): it is a
    // different node from the same state reached otherwise.
    const forgotten = child.holder >= 0 && mentionsLeft[child.holder] === 0;
    const memo = `${bitsKey()}|${forgotten ? `x/${child.rest}` : child.key}${isBusy(ops[childOp]!) ? `|b${childOp}` : ''}`;
    if (seen.has(memo)) {
      unlift(childOp);
      bits[childOp >> 4]! &= ~(1 << (childOp & 15));
      continue;
    }
    seen.add(memo);
    const cands = candidates(child);
    // Store time never goes back: once the last step is certainly later than the end of a
    // pending completed operation's window, that operation can no longer be linearized. This
    // is what keeps :info operations (window open to +∞) from being tried in every subset at
    // a dead end: an effect that needs a late instant is cut at once.
    const earliest = child.lastAt;
    if (cands.some((c) => ops[c]!.outcome !== 'info' && ops[c]!.hi < earliest)) {
      unlift(childOp);
      bits[childOp >> 4]! &= ~(1 << (childOp & 15));
      continue;
    }
    if (ops[childOp]!.outcome !== 'info') left--;
    stack.push({ state: child, cands, ci: -1, succ: [], si: 0, via: childOp });
  }
  return { status: 'violated', steps, reasons };
}

/**
 * Partial-order reduction: two busy answers linearized back to back commute when the later-
 * invoked one (`last`, index `li`) could have come first — concurrent in real time, and the
 * earlier-invoked one's (`cand`, index `ci`) store window starts no later than `last`'s ends.
 * Any linearization with `last` right before `cand` then has one with them swapped: both
 * need only "holder live at T", and some T in both windows between the neighbours exists
 * (the same instant for both, or one instant in the windows' overlap). So the search keeps
 * adjacent busy answers in invocation order wherever they could be swapped.
 */
function swappable(last: SearchOp, li: number, cand: SearchOp, ci: number): boolean {
  return (
    ci < li &&
    isBusy(last) &&
    isBusy(cand) &&
    cand.src.storeLo <= last.hi &&
    cand.src.invokeT <= last.src.completeT
  );
}

/** For each :info operation, a string naming its effect (see `candidates` in {@link search}). */
function infoKinds(ops: readonly SearchOp[]): string[] {
  const mentions = new Map<number, number>();
  for (const o of ops) {
    mentions.set(o.lease, (mentions.get(o.lease) ?? 0) + 1);
    // A hand-off names the lease it releases too: that lease is not anonymous.
    if (o.releaseLease !== NO_LEASE)
      mentions.set(o.releaseLease, (mentions.get(o.releaseLease) ?? 0) + 1);
  }
  return ops.map((o) => {
    if (o.outcome !== 'info') return '';
    const s = o.src;
    // A grant's effect includes the block it reserves.
    if (s.f === 'acquire' && mentions.get(o.lease) === 1)
      return `anonymous acquire/${s.ttlMs}/${o.block}`;
    if (s.f === 'hand_off')
      return `hand_off/${o.lease}/${o.releaseLease}/${s.releaseToken}/${s.ttlMs}/${o.block}`;
    return `${s.f}/${o.lease}/${s.token}/${s.ttlMs}/${o.block}`;
  });
}

export function prepare(
  list: readonly LeaseOp[],
  cutoff: number,
): { ops: SearchOp[]; names: string[] } {
  const leaseIndex = new Map<string, number>();
  const names: string[] = [];
  const ops: SearchOp[] = [];
  const indexOf = (label: string): number => {
    let index = leaseIndex.get(label);
    if (index === undefined) {
      index = names.length;
      names.push(label);
      leaseIndex.set(label, index);
    }
    return index;
  };
  for (const o of list) {
    if (o.invokeT > cutoff) continue;
    const lease = indexOf(o.lease);
    const releaseLease = o.releaseLease === undefined ? NO_LEASE : indexOf(o.releaseLease);
    // Answered after the cutoff: within the prefix it is still pending, so unknown.
    const pending = o.completeT > cutoff;
    ops.push({
      src: o,
      lease,
      block: BigInt(o.tokenBlock),
      releaseLease,
      outcome: pending ? 'info' : o.outcome,
      hi: pending ? Infinity : o.storeHi,
    });
  }
  return { ops, names };
}
