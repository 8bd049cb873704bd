import { invalidArgument } from '../../core/errors.js';
import { integerOption, requireObject } from '../../core/runtime/options.js';
import type { EtcdClient, EtcdClientOptions } from './client.js';

/** Options for {@link EtcdLeaseStore}. */
export interface EtcdLeaseStoreOptions {
  /**
   * etcd client URLs (`http://10.0.0.1:2379`), or an existing `Etcd3` client in `client`.
   * Defaults to `http://127.0.0.1:2379`.
   */
  readonly hosts?: string | readonly string[];
  /**
   * A client to use instead of `hosts`: an etcd3 `Etcd3`, or anything with the members of
   * {@link EtcdClient}. The store does not close it. Defaults to a client the store opens
   * for `hosts`.
   */
  readonly client?: EtcdClient;
  /**
   * More `etcd3` client options when the store makes its own client: TLS as
   * `credentials: { rootCertificate, certChain?, privateKey? }` (PEM buffers; use `https://`
   * hosts) and an etcd user as `auth: { username, password }`. The user's role needs
   * readwrite on the `namespace` prefix only. Defaults to none.
   */
  readonly clientOptions?: EtcdClientOptions;
  /**
   * Prepended to every etcd key. With the default `''`, leasehold key `jobs/nightly` is
   * exactly what `etcdctl lock jobs/nightly` locks; with `'locks/'`, it is
   * `etcdctl lock locks/jobs/nightly`. Defaults to `''`.
   */
  readonly namespace?: string;
  /**
   * The shortest TTL this store accepts. etcd TTLs are whole seconds, and the server raises a
   * TTL below 1.5 × its election timeout (2 s with default settings) to that minimum; the
   * client refuses shorter TTLs rather than being surprised by longer ones. Set 1000 for a
   * server with `--election-timeout` ≤ 666 ms. Defaults to 2000.
   */
  readonly minTtlMs?: number;
  /**
   * Extra etcd TTL of each shared session over its leases' TTL, in whole seconds. A
   * keepalive sent within (headroom − 200 ms) before an acquire covers it, so an acquire on a
   * recently kept-alive session is one round trip. A crashed holder's entries disappear up to
   * this much later than their TTL (TTLs are lower bounds). Defaults to 1.
   */
  readonly sessionHeadroomS?: number;
  /**
   * Renewals wait for a keepalive of their session sent after they began; all renewals
   * waiting share one. Rounds of one session are at least this far apart, which bounds
   * renewal traffic at 1000 / renewBatchMs keepalives per second per session whatever the
   * number of leases, and adds at most this much to a renewal's latency. Defaults to 100.
   */
  readonly renewBatchMs?: number;
}

/** The defaults of {@link EtcdLeaseStoreOptions}. */
export const DEFAULTS = Object.freeze({
  hosts: Object.freeze<readonly string[]>(['http://127.0.0.1:2379']),
  namespace: '',
  minTtlMs: 2000,
  sessionHeadroomS: 1,
  renewBatchMs: 100,
});

/**
 * How much younger than the session headroom a keepalive must be to cover a new acquire:
 * the margin for the time between sending the keepalive and etcd applying it.
 */
const HEADROOM_SAFETY_MS = 200;

/** {@link EtcdLeaseStoreOptions}, validated, with every default filled in. */
export interface ResolvedEtcdStoreOptions {
  readonly namespace: string;
  readonly minTtlMs: number;
  readonly headroomS: number;
  readonly headroomMs: number;
  /** How old a keepalive may be and still cover a new acquire. */
  readonly reuseWindowMs: number;
  readonly renewBatchMs: number;
  /** The caller's client, if one was given (then `hosts` and `clientOptions` are unused). */
  readonly client: EtcdClient | undefined;
  readonly hosts: string | readonly string[];
  readonly clientOptions: EtcdClientOptions | undefined;
}

/** Validates the store's options; throws `ERR_INVALID_ARGUMENT` naming the field and the rule. */
export function resolveEtcdStoreOptions(
  options: EtcdLeaseStoreOptions = {},
): ResolvedEtcdStoreOptions {
  requireObject(options);
  const namespace = options.namespace ?? DEFAULTS.namespace;
  if (typeof namespace !== 'string' || /[\u0000-\u001f]/.test(namespace)) {
    throw invalidArgument('namespace', 'must be a string without control characters', namespace);
  }
  const minTtlMs = options.minTtlMs ?? DEFAULTS.minTtlMs;
  if (!Number.isInteger(minTtlMs) || minTtlMs < 1000 || minTtlMs % 1000 !== 0) {
    throw invalidArgument('minTtlMs', 'must be a whole number of seconds, at least 1000', minTtlMs);
  }
  const headroomS = integerOption(
    'sessionHeadroomS',
    options.sessionHeadroomS,
    DEFAULTS.sessionHeadroomS,
    1,
    60,
  );
  const renewBatchMs = integerOption(
    'renewBatchMs',
    options.renewBatchMs,
    DEFAULTS.renewBatchMs,
    0,
    1000,
  );
  const headroomMs = headroomS * 1000;
  return {
    namespace,
    minTtlMs,
    headroomS,
    headroomMs,
    reuseWindowMs: headroomMs - HEADROOM_SAFETY_MS,
    renewBatchMs,
    client: options.client,
    hosts: options.hosts ?? DEFAULTS.hosts,
    clientOptions: options.clientOptions,
  };
}
