import type { ManualClock } from '../testing/manual-clock.js';
import { LeaseholdError } from '../core/errors.js';
import {
  canHandOff,
  type HandOffLeaseStore,
  type LeaseStore,
  type StoreAcquireRequest,
  type StoreAcquireResult,
  type StoreLeaseRef,
  type StoreReleaseResult,
  type StoreRenewResult,
  type StoreRequestOptions,
  type Unwatch,
} from '../core/store.js';
import type { LeaseState } from '../core/types.js';
import type { SimProcess } from './process.js';
import type { SeededRandom } from './random.js';

/** How one direction of a link misbehaves; probabilities per message. */
export interface LinkProfile {
  readonly minDelayMs: number;
  readonly maxDelayMs: number;
  /** The request never arrives. */
  readonly dropRequest: number;
  /** The request is applied but its reply never arrives (ambiguous outcome, F5/F6). */
  readonly dropReply: number;
  /** The request is delivered twice (the second after its own delay). */
  readonly duplicate: number;
}

/** A clean, fast link. */
export const CALM_LINK: LinkProfile = Object.freeze({
  minDelayMs: 1,
  maxDelayMs: 5,
  dropRequest: 0,
  dropReply: 0,
  duplicate: 0,
});

/**
 * The workloads' lossy link: delays up to a tenth of the TTL, 2% of requests and 3% of replies
 * dropped, and `duplicate` of requests delivered twice.
 */
export function lossyLink(ttlMs: number, duplicate: number): LinkProfile {
  const maxDelayMs = Math.max(2, Math.floor(ttlMs / 10));
  return { minDelayMs: 1, maxDelayMs, dropRequest: 0.02, dropReply: 0.03, duplicate };
}

/** What the network did to one message, for a scenario's own hooks. */
export interface MessageInfo {
  readonly from: string;
  readonly to: string;
  readonly label: string;
}

/**
 * The simulated network between processes and servers (store, resource). Every call is a
 * request and a reply, each delayed, dropped or duplicated per the link profile and the
 * seed; replies reach the caller through its {@link SimProcess}, so a frozen caller reads
 * them only when it runs again. Holds (per process and direction) model a partition or a
 * proxy holding bytes.
 */
export class SimNetwork {
  private readonly profiles = new Map<string, LinkProfile>();
  private readonly holds = new Map<string, number>();
  /** Extra one-shot delays for the next request from a process with a label (F3). */
  private readonly nextDelays = new Map<string, number>();
  private readonly replyDrops = new Map<string, number>();
  private readonly duplicateListeners: ((message: MessageInfo) => void)[] = [];

  constructor(
    private readonly clock: ManualClock,
    private readonly random: SeededRandom,
    private readonly defaultProfile: LinkProfile = CALM_LINK,
  ) {}

  /** Sets the profile of the link from `proc` to server `to`. */
  setProfile(proc: string, to: string, profile: LinkProfile): void {
    this.profiles.set(`${proc}>${to}`, profile);
  }

  /** Holds every request from `proc` to `to` until virtual time `until` (then delivers). */
  holdRequests(proc: string, to: string, until: number): void {
    this.holds.set(`${proc}>${to}`, until);
  }

  /** Holds every reply from `to` to `proc` until virtual time `until`. */
  holdReplies(proc: string, to: string, until: number): void {
    this.holds.set(`${to}>${proc}`, until);
  }

  /** Delays the next request from `proc` whose label is `label` by `ms` extra. */
  delayNext(proc: string, label: string, ms: number): void {
    this.nextDelays.set(`${proc}:${label}`, ms);
  }

  /** Drops the reply to the next `count` requests from `proc` labelled `label` (applied, unanswered). */
  dropNextReply(proc: string, label: string, count = 1): void {
    this.replyDrops.set(`${proc}:${label}`, count);
  }

  /**
   * Calls `listener` synchronously, inside {@link call}, whenever a request is about to be
   * delivered twice: the copy is a second operation at the server whose answer nobody reads,
   * and a history that checks operations (I5) must know it exists.
   */
  onDuplicate(listener: (message: MessageInfo) => void): void {
    this.duplicateListeners.push(listener);
  }

  /**
   * Sends a request from `proc` to server `to`, runs `serve` there on arrival, and resolves
   * with its answer back in `proc` — or never, when the request or reply is dropped (the
   * caller's own timeout decides, as with a real network).
   */
  call<T>(proc: SimProcess, to: string, label: string, serve: () => Promise<T>): Promise<T> {
    const profile = this.profiles.get(`${proc.name}>${to}`) ?? this.defaultProfile;
    const oneShot = `${proc.name}:${label}`;
    const extra = this.nextDelays.get(oneShot) ?? 0;
    this.nextDelays.delete(oneShot);
    let dropReply = this.random.chance(profile.dropReply);
    const forced = this.replyDrops.get(oneShot) ?? 0;
    if (forced > 0) {
      dropReply = true;
      if (forced === 1) this.replyDrops.delete(oneShot);
      else this.replyDrops.set(oneShot, forced - 1);
    }
    const dropRequest = this.random.chance(profile.dropRequest);
    const duplicate = this.random.chance(profile.duplicate);
    return new Promise<T>((resolve, reject) => {
      if (dropRequest) return;
      const deliver = (answer: boolean): void => {
        let result: Promise<T>;
        try {
          result = serve();
        } catch (err) {
          result = Promise.reject(err instanceof Error ? err : new Error(String(err)));
        }
        if (!answer) {
          result.catch(() => undefined);
          return;
        }
        result.then(
          (value) => this.send(to, proc.name, profile, 0, () => proc.run(() => resolve(value))),
          (err: unknown) =>
            this.send(to, proc.name, profile, 0, () =>
              proc.run(() => reject(err instanceof Error ? err : new Error(String(err)))),
            ),
        );
      };
      this.send(proc.name, to, profile, extra, () => deliver(!dropReply));
      if (duplicate) {
        for (const l of this.duplicateListeners) l({ from: proc.name, to, label });
        this.send(proc.name, to, profile, extra, () => deliver(false));
      }
    });
  }

  private send(
    from: string,
    to: string,
    profile: LinkProfile,
    extra: number,
    arrive: () => void,
  ): void {
    const latency = this.random.int(profile.minDelayMs, profile.maxDelayMs) + extra;
    const holdUntil = this.holds.get(`${from}>${to}`) ?? Number.NEGATIVE_INFINITY;
    const at = Math.max(this.clock.now() + latency, holdUntil);
    this.clock.setTimeout(arrive, at - this.clock.now());
  }
}

/**
 * A {@link LeaseStore} as one process sees it across the simulated network: every call
 * travels to the real store and back through {@link SimNetwork}. Watch notifications also
 * arrive through the process (frozen processes see them late).
 *
 * A hand-off (`releaseAndAcquire`) is one request and one reply like any other call — delayed,
 * dropped, duplicated or its reply lost — and exists only when the store behind can hand off.
 */
export class NetworkedStore implements LeaseStore {
  readonly kind: string;
  readonly capabilities: LeaseStore['capabilities'];
  /** Present only when the inner store can hand off (`canHandOff` stays truthful). */
  declare readonly releaseAndAcquire?: HandOffLeaseStore['releaseAndAcquire'];

  constructor(
    private readonly inner: LeaseStore,
    private readonly network: SimNetwork,
    private readonly proc: SimProcess,
  ) {
    this.kind = inner.kind;
    this.capabilities = inner.capabilities;
    if (canHandOff(inner)) {
      const handOff: HandOffLeaseStore['releaseAndAcquire'] = (release, acquire, o) =>
        this.network.call(this.proc, 'store', 'hand_off', () =>
          inner.releaseAndAcquire(release, acquire, o),
        );
      Object.defineProperty(this, 'releaseAndAcquire', { value: handOff, enumerable: false });
    }
  }

  tryAcquire(request: StoreAcquireRequest, o: StoreRequestOptions): Promise<StoreAcquireResult> {
    return this.network.call(this.proc, 'store', 'acquire', () =>
      this.inner.tryAcquire(request, o),
    );
  }

  renew(
    lease: StoreLeaseRef & { ttlMs: number },
    o: StoreRequestOptions,
  ): Promise<StoreRenewResult> {
    return this.network.call(this.proc, 'store', 'renew', () => this.inner.renew(lease, o));
  }

  release(lease: StoreLeaseRef, o: StoreRequestOptions): Promise<StoreReleaseResult> {
    return this.network.call(this.proc, 'store', 'release', () => this.inner.release(lease, o));
  }

  inspect(key: string, o: StoreRequestOptions): Promise<LeaseState> {
    return this.network.call(this.proc, 'store', 'inspect', () => this.inner.inspect(key, o));
  }

  list(prefix: string, limit: number, o: StoreRequestOptions): Promise<LeaseState[]> {
    return this.network.call(this.proc, 'store', 'list', () => this.inner.list(prefix, limit, o));
  }

  async watch(key: string, onChange: () => void): Promise<Unwatch> {
    if (this.proc.crashed) throw new LeaseholdError('ERR_UNAVAILABLE', 'process crashed');
    return this.inner.watch(key, () => this.proc.run(onChange));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
