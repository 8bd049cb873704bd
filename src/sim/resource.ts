import type { FenceResult } from '../core/results.js';
import type { Clock } from '../core/runtime/clock.js';
import type { HistoryRecorder } from '../history/recorder.js';

/** How a fenced resource compares a write's token with its high-water mark. */
export type FencePolicy = '>=' | '>';

interface Scope {
  hwm: bigint;
  values: string[];
  readonly applied: Set<string>;
}

/**
 * The protected resource of the simulation: per scope a list of values and a high-water mark,
 * checked and advanced atomically with each write (I1). With `fenced: false` it is the
 * control arm: it applies every write, as storage without token checks does, but still
 * records the token so the checker can see stale writes land.
 */
export class SimFencedResource {
  private readonly scopes = new Map<string, Scope>();

  constructor(
    private readonly clock: Clock,
    private readonly history: HistoryRecorder,
    readonly fenced: boolean,
    readonly policy: FencePolicy = '>=',
  ) {}

  /**
   * The scope's current values and mark (a consistent snapshot). A fenced resource also
   * advances the mark to `token`: a read-modify-write is protected only if its read claims the
   * scope, otherwise an older holder's write could land between a newer holder's read and
   * write and then be overwritten (a lost acknowledged write, I6).
   */
  read(scope: string, token?: bigint): { values: readonly string[]; hwm: bigint } {
    const s = this.scope(scope);
    if (this.fenced && token !== undefined && token > s.hwm) s.hwm = token;
    return { values: [...s.values], hwm: s.hwm };
  }

  /**
   * Replaces the scope's values if `token` passes the fence: `applied`, `duplicate` for an
   * `(token, opId)` seen before, or `stale_fence` with the mark.
   */
  write(scope: string, token: bigint, opId: string, values: readonly string[]): FenceResult<null> {
    const s = this.scope(scope);
    const base = {
      type: 'resource',
      t: this.clock.now(),
      op: opId,
      resource: scope,
      token: token.toString(),
    } as const;
    const id = `${token}:${opId}`;
    if (s.applied.has(id)) {
      this.history.record({ ...base, action: 'duplicate', hwm: s.hwm.toString() });
      return { status: 'duplicate' };
    }
    const stale = this.policy === '>=' ? token < s.hwm : token <= s.hwm;
    if (this.fenced && stale) {
      this.history.record({ ...base, action: 'rejected', hwm: s.hwm.toString() });
      return { status: 'stale_fence', highWaterMark: s.hwm };
    }
    s.values = [...values];
    s.applied.add(id);
    if (token > s.hwm) s.hwm = token;
    this.history.record({ ...base, action: 'applied', hwm: s.hwm.toString() });
    return { status: 'applied', value: null };
  }

  /**
   * Claim before start: raises the scope's mark to `token` with no write, when `token` is not
   * below it (`applied`), else `stale_fence` with the mark. A resource that does not check
   * tokens has nothing to install: `applied`, and nothing changes.
   */
  claim(scope: string, token: bigint, proc?: string): 'applied' | 'stale_fence' {
    if (!this.fenced) return 'applied';
    const s = this.scope(scope);
    const action = token < s.hwm ? 'stale_fence' : 'applied';
    if (action === 'applied') s.hwm = token;
    this.history.record({
      type: 'claim',
      action,
      t: this.clock.now(),
      ...(proc === undefined ? {} : { proc }),
      resource: scope,
      token: token.toString(),
      hwm: s.hwm.toString(),
    });
    return action;
  }

  /** Records every scope's final contents (for I6). */
  recordFinal(): void {
    for (const [resource, s] of this.scopes) {
      this.history.record({
        type: 'final',
        t: this.clock.now(),
        resource,
        values: [...s.values],
        ...(s.hwm > 0n ? { hwm: s.hwm.toString() } : {}),
      });
    }
  }

  private scope(name: string): Scope {
    let s = this.scopes.get(name);
    if (s === undefined) this.scopes.set(name, (s = { hwm: 0n, values: [], applied: new Set() }));
    return s;
  }
}
