import type { HistoryEvent } from '../history/events.js';
import { HistoryRecorder } from '../history/recorder.js';
import { LeaseLabels } from '../sim/recording-store.js';
import { sharedNow, type WorkerNotice } from './protocol.js';
import { withoutWorkerStoreTime } from './store-time.js';

/**
 * The worker's part of the shared history: events go to the harness over IPC, which records
 * them; op ids carry the worker's name, so they are unique across processes. Store times:
 * see store-time.ts.
 */
export class ForwardedHistory extends HistoryRecorder {
  constructor(
    private readonly name: string,
    private readonly send: (notice: WorkerNotice) => unknown,
  ) {
    super();
  }

  override newOp(prefix = 'op'): string {
    return super.newOp(`${this.name}-${prefix}`);
  }

  override record(event: HistoryEvent): void {
    const record = event.type === 'store_op' ? withoutWorkerStoreTime(event) : event;
    this.send({ event: 'history', t: sharedNow(), record });
  }
}

/**
 * Lease labels shared by the worker's client events and its store operations (`A-L1`, …, in
 * order of first sight), unique across workers.
 */
export class WorkerLeaseLabels extends LeaseLabels {
  private readonly byId = new Map<string, string>();

  constructor(private readonly name: string) {
    super();
  }

  override of(leaseId: string): string {
    let label = this.byId.get(leaseId);
    if (label === undefined)
      this.byId.set(leaseId, (label = `${this.name}-L${this.byId.size + 1}`));
    return label;
  }
}
