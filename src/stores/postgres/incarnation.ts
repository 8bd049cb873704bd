import type { StoreLossReason } from '../../core/store.js';
import { parseBigint, type PgResult } from '../../drivers/postgres/client.js';

/** A change of incarnation that a store's own check raised the epoch for. */
export interface IncarnationChange {
  readonly reason: StoreLossReason;
  /** Every token granted after the change exceeds it. */
  readonly floor: bigint;
}

/**
 * What a PostgreSQL store knows of its server's incarnations (decision 042), from the answers
 * of the incarnation check (INCARNATION_CHECK) that opens each grant and renewal message: the highest
 * epoch floor a change of incarnation set, and why. A lease whose token is at or below that
 * floor was granted by an earlier incarnation, so a renewal that answers `lost` for it was
 * ended by the change: the store reports `failover` or `restore` instead of a plain `lost`.
 *
 * Each connection answers with the value it remembered when it first checked, so the common
 * case is one string comparison with the last answer.
 */
export class IncarnationWatch {
  private last = '';
  private floor = 0n;
  private reason: StoreLossReason | undefined;

  constructor(private readonly onChange: ((change: IncarnationChange) => void) | undefined) {}

  /** Reads one check answer (the first result of a grant or renewal message). */
  observe(result: PgResult | undefined): void {
    const value = result?.rows[0]?.['incarnation'];
    if (typeof value !== 'string' || value === this.last) return;
    this.last = value;
    const raised = value.startsWith('! ');
    const [floorText, reason] = (raised ? value.slice(2) : value).split(' ');
    if (reason !== 'failover' && reason !== 'restore') return; // 'recovery', or no change yet
    const floor = parseBigint(floorText);
    if (floor > this.floor) {
      this.floor = floor;
      this.reason = reason;
    }
    if (raised) this.onChange?.({ reason, floor });
  }

  /** Why a lease with `token` that the store answered `lost` for ended, when a change did it. */
  lossReason(token: bigint): StoreLossReason | undefined {
    return this.reason !== undefined && token <= this.floor ? this.reason : undefined;
  }
}
