import type { LeaseClient } from '../core/client.js';
import type { LeaseEvent, LeaseEventOf } from '../core/events.js';
import type { Lease } from '../core/lease.js';
import type { Token } from '../core/types.js';
import { invalidArgument } from '../core/errors.js';

/**
 * One thing a lease client did, as the metrics and traces count it: the client's own event
 * plus what the event alone does not say (renewal slack; whether a release ended a held
 * lease or one that was already lost).
 */
export type LeaseObservation =
  | {
      readonly kind: 'acquire';
      readonly event: LeaseEventOf<'acquired'> | LeaseEventOf<'busy'> | LeaseEventOf<'unavailable'>;
    }
  | {
      readonly kind: 'renew';
      readonly result: 'renewed' | 'unavailable' | 'lost';
      readonly event: LeaseEventOf<'renewed'> | LeaseEventOf<'renew_failed'> | LeaseEventOf<'lost'>;
      /** With `renewed`: how much of the lease's local validity was left when the answer came. */
      readonly slackMs: number | undefined;
    }
  | {
      readonly kind: 'release';
      readonly event: LeaseEventOf<'released'>;
      /**
       * How long the lease was held, when this release ended it; undefined when it had been
       * lost before (its time held was counted at the loss) or was not seen being held.
       */
      readonly heldMs: number | undefined;
    }
  | { readonly kind: 'loss'; readonly event: LeaseEventOf<'lost'> };

/** What the observer remembers of one held lease. */
interface Track {
  readonly token: Token;
  readonly lease: Lease | undefined;
  /** The lease's local deadline before the renewal now in flight: slack is measured to it. */
  deadline: number | undefined;
}

/**
 * Subscribes to `client`'s events and reports each as a {@link LeaseObservation}. Returns a
 * function that unsubscribes. Remembers only the leases the client holds (forgotten when they
 * end), so its memory is bounded by the client's own.
 */
export function observeLeaseClient(
  client: LeaseClient,
  report: (observation: LeaseObservation) => void,
): () => void {
  // Per key, the leases of this client on it: one, or two for the moment a hand-off reports
  // the next holder before the previous one's release.
  const held = new Map<string, Track[]>();
  const find = (key: string, token: Token): Track | undefined =>
    held.get(key)?.find((t) => t.token === token);
  const forget = (key: string, token: Token): Track | undefined => {
    const list = held.get(key);
    const i = list?.findIndex((t) => t.token === token) ?? -1;
    if (list === undefined || i < 0) return undefined;
    const [track] = list.splice(i, 1);
    if (list.length === 0) held.delete(key);
    return track;
  };
  const remember = (lease: Lease | undefined, key: string, token: Token): Track => {
    const track: Track = { token, lease, deadline: lease?.deadline };
    const list = held.get(key);
    if (list === undefined) held.set(key, [track]);
    else list.push(track);
    return track;
  };
  // The events carry no deadline: the slack needs the Lease itself. The client reports an
  // acquisition right after adding the lease to its held list, so it is the last one there.
  const leaseOf = (key: string, token: Token): Lease | undefined => {
    const leases = client.heldLeases();
    const last = leases[leases.length - 1];
    if (last !== undefined && last.key === key && last.token === token) return last;
    return leases.find((l) => l.key === key && l.token === token);
  };
  for (const lease of client.heldLeases()) remember(lease, lease.key, lease.token);

  const onEvent = (event: LeaseEvent): void => {
    switch (event.type) {
      case 'acquired':
        remember(leaseOf(event.key, event.token), event.key, event.token);
        report({ kind: 'acquire', event });
        return;
      case 'busy':
      case 'unavailable':
        report({ kind: 'acquire', event });
        return;
      case 'renewed': {
        const track = find(event.key, event.token);
        let slackMs: number | undefined;
        if (track !== undefined) {
          if (track.deadline !== undefined) slackMs = Math.max(0, track.deadline - client.now());
          track.deadline = track.lease?.deadline;
        }
        report({ kind: 'renew', result: 'renewed', event, slackMs });
        return;
      }
      case 'renew_failed':
        report({ kind: 'renew', result: 'unavailable', event, slackMs: undefined });
        return;
      case 'lost':
        forget(event.key, event.token);
        // `lost`, `failover` and `restore` (not expired, clock or closed) are always a renewal
        // the store answered "gone".
        if (event.reason === 'lost' || event.reason === 'failover' || event.reason === 'restore') {
          report({ kind: 'renew', result: 'lost', event, slackMs: undefined });
        }
        report({ kind: 'loss', event });
        return;
      case 'released': {
        // A lease that was lost first is still released at the store; its time held ended
        // at the loss and was counted there.
        const track = forget(event.key, event.token);
        report({ kind: 'release', event, heldMs: track === undefined ? undefined : event.heldMs });
        return;
      }
    }
  };
  return client.on('*', onEvent);
}

/** A change of this process's leadership in one election. */
export type LeadershipChange = 'elected' | 'stepped_down';

/**
 * Reports when `client` becomes leader of the election whose lease key is `key`, and when it
 * stops (resigned, lost or stepped down): leadership is the client's lease on that key.
 */
export function observeLeadership(
  client: LeaseClient,
  key: string,
  report: (change: LeadershipChange) => void,
): () => void {
  let leading: Token | undefined;
  for (const lease of client.heldLeases()) if (lease.key === key) leading = lease.token;
  return client.on('*', (event) => {
    if (event.key !== key) return;
    if (event.type === 'acquired') {
      if (leading !== undefined) report('stepped_down');
      leading = event.token;
      report('elected');
    } else if ((event.type === 'lost' || event.type === 'released') && event.token === leading) {
      leading = undefined;
      report('stepped_down');
    }
  });
}

/** Throws `ERR_INVALID_ARGUMENT` unless `client` is a LeaseClient (what an attach takes). */
export function requireLeaseClient(client: LeaseClient): void {
  if (typeof client?.on !== 'function')
    throw invalidArgument('client', 'must be a LeaseClient', client);
}

/** Throws `ERR_INVALID_ARGUMENT` unless `election` has a name and a key (what an attach reads). */
export function requireElection(election: { readonly name: string; readonly key: string }): void {
  if (typeof election?.name !== 'string' || typeof election.key !== 'string')
    throw invalidArgument('election', 'must be an Election', election);
}

/**
 * Checks `client`, adds it to `clients` and reports its observations until the returned
 * function is called (safe to call more than once; it also takes the client out of `clients`).
 * What the Prometheus metrics and the OpenTelemetry telemetry both do on `attach`.
 */
export function attachLeaseClient(
  clients: Set<LeaseClient>,
  client: LeaseClient,
  report: (observation: LeaseObservation) => void,
): () => void {
  requireLeaseClient(client);
  clients.add(client);
  const unsubscribe = observeLeaseClient(client, report);
  let attached = true;
  return () => {
    if (!attached) return;
    attached = false;
    unsubscribe();
    clients.delete(client);
  };
}
