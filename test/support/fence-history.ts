import { checkHistory, type CheckReport } from '../../src/check/checker.js';
import { HistoryRecorder } from '../../src/history/recorder.js';
import { sharedNow } from '../../src/fault/protocol.js';

/** What a resource did with one write, in its own commit order. */
export interface ResourceLogEntry {
  readonly op: string;
  readonly token: string;
  readonly action: 'applied' | 'rejected';
  /** The mark that refused a rejected write. */
  readonly hwm?: string;
}

/**
 * A history of fenced writes to a resource that is not the real-process harness's SQLite
 * file (a PostgreSQL table behind a `PostgresFence`, a Redis key behind a `RedisFence`): each
 * write's invoke and answer as its writer saw them, and then the resource's own log in commit
 * order, checked by the history checker (I1 above all).
 */
export class FenceHistory {
  readonly recorder = new HistoryRecorder();

  constructor(scenario: string) {
    this.recorder.record({
      type: 'meta',
      version: 1,
      t: sharedNow(),
      source: 'leasehold-real',
      scenario,
    });
  }

  /** Records one write's invoke; returns its op id for {@link answer} and the resource log. */
  invoke(proc: string, resource: string, token: bigint, fenced: boolean): string {
    const op = this.recorder.newOp(`${proc}-w`);
    this.recorder.record({
      type: 'write',
      phase: 'invoke',
      t: sharedNow(),
      proc,
      op,
      resource,
      token: String(token),
      fenced,
    });
    return op;
  }

  /** Records the writer's answer (`unknown` when it got none: the resource died). */
  answer(
    proc: string,
    op: string,
    resource: string,
    token: bigint,
    outcome: 'ok' | 'stale' | 'unknown',
  ): void {
    this.recorder.record({
      type: 'write',
      phase: outcome,
      t: sharedNow(),
      proc,
      op,
      resource,
      token: String(token),
    });
  }

  fault(fault: string, detail: string): void {
    this.recorder.record({ type: 'fault', t: sharedNow(), fault, detail });
  }

  /** Appends the resource's log (commit order) and checks the whole history. */
  check(resource: string, log: readonly ResourceLogEntry[]): CheckReport {
    const t = sharedNow();
    for (const e of log)
      this.recorder.record({
        type: 'resource',
        action: e.action,
        t,
        op: e.op,
        resource,
        token: e.token,
        ...(e.hwm === undefined ? {} : { hwm: e.hwm }),
      });
    return checkHistory(this.recorder.events);
  }
}
