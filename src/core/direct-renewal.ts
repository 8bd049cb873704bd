import type { LeaseContext } from './lease-grant.js';
import type { LeaseRenewal, RenewalTiming, RenewingLease } from './lease-renewal.js';
import { boundedRequest } from './runtime/request.js';
import type { RenewResult } from './results.js';
import type { StoreRenewRequest } from './store.js';

/**
 * A lease's renewals on a store without `renewMany`: each one bounded request of its own, and
 * at most one in flight (a second caller gets the same answer).
 */
export class DirectRenewal implements LeaseRenewal, RenewalTiming {
  sentAt = 0;
  scheduledFor = 0;
  timeoutMs = 1;
  private readonly request: StoreRenewRequest;
  private inflight: Promise<RenewResult> | undefined;

  constructor(
    private readonly lease: RenewingLease,
    private readonly ctx: Pick<LeaseContext, 'store' | 'timeouts'>,
  ) {
    this.request = lease.renewRequest();
  }

  renew(): Promise<RenewResult> {
    if (this.inflight) return this.inflight;
    const p = this.send().finally(() => {
      if (this.inflight === p) this.inflight = undefined;
    });
    this.inflight = p;
    return p;
  }

  renewInBackground(): void {
    this.renew().catch((err: unknown) => this.lease.failClosed(err));
  }

  inFlight(): Promise<RenewResult> | undefined {
    return this.inflight;
  }

  private async send(): Promise<RenewResult> {
    const ended = this.lease.prepareRenewal(undefined, this);
    if (ended !== undefined) return ended;
    // Copied before the await: the fields are this renewal's only until it settles.
    const { sentAt, scheduledFor, timeoutMs, request } = this;
    const { store, timeouts } = this.ctx;
    const settled = await boundedRequest(timeouts, timeoutMs, undefined, (o) =>
      store.renew(request, o),
    );
    return this.lease.applyRenewal(sentAt, scheduledFor, settled) ?? this.lease.renewed();
  }
}
