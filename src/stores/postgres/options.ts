import { booleanOption, requireObject } from '../../core/runtime/options.js';
import { invalidArgument } from '../../core/errors.js';
import type { IncarnationChange } from './incarnation.js';
import {
  checkIdentifier,
  type PgConnectionConfig,
  type PostgresConnectionOptions,
} from '../../drivers/postgres/client.js';

/** Options for {@link PostgresLeaseStore}: a connection (exactly one of pool / connectionString / connection) and where the table lives. */
export interface PostgresLeaseStoreOptions extends PostgresConnectionOptions {
  /** The schema of the lease table. Defaults to `public`. */
  readonly schema?: string;
  /** The lease table. Defaults to `coordination_lease`, the seed's name. */
  readonly table?: string;
  /**
   * Apply pending migrations (advisory-locked, once per store) before the first request.
   * Set `false` when the application's role may not run DDL and `leasehold migrate` runs
   * at deploy time instead. Defaults to `true`.
   */
  readonly autoMigrate?: boolean;
  /**
   * `synchronous_commit` for the statements that grant, renew and release, set per
   * transaction. `on` (the default) makes a returned token durable on the primary's disk
   * (and on synchronous standbys, when configured) even if the server default is `off`;
   * `remote_apply` additionally waits until synchronous standbys can read it;
   * `server_default` leaves the server's setting alone. Defaults to `on`.
   */
  readonly synchronousCommit?: 'on' | 'remote_apply' | 'server_default';
  /**
   * Whether a release waits for its WAL flush like a grant. By default a release commits with
   * `synchronous_commit = off`: it answers without waiting for the disk, and a release lost
   * in a database crash only means the key stays held until its lease expires (its token is
   * never reused). Grants and renewals always use `synchronousCommit`. Ignored with
   * `synchronousCommit: 'server_default'`. Defaults to `false`.
   */
  readonly durableReleases?: boolean;
  /**
   * Settings (or a connection string) for the dedicated LISTEN session that wakes waiters.
   * Defaults to the settings of the pool (pg's `Pool` exposes them) or of `connectionString`.
   * The session must reach PostgreSQL directly: behind PgBouncer (whose transaction pooling
   * silently drops notifications) the store refuses to listen, and waiters fall back to polling
   * with a warning naming the pooling mode. With a pooler in front of the pool, set this to a
   * direct connection (one per store).
   */
  readonly listenConnection?: PgConnectionConfig | string;
  /**
   * Whether the store notices a failover or a restore by itself (decision 042): the first
   * write on each connection compares the server's system identifier and timeline with the
   * ones recorded next to the lease table and, when they changed, raises the token epoch
   * before anything is granted. Switch it off only where the database role may not call
   * `pg_control_system()`; then run `leasehold epoch` after every promotion and restore.
   * Defaults to `true`.
   */
  readonly detectIncarnation?: boolean;
  /**
   * Called when this store's check raised the token epoch after a change of incarnation
   * (another process's store may have raised it first; then only leases end). For logs and
   * alerts. Defaults to none.
   */
  readonly onIncarnationChange?: (change: IncarnationChange) => void;
}

/** The defaults of {@link PostgresLeaseStoreOptions}. */
export const DEFAULTS = Object.freeze({
  schema: 'public',
  table: 'coordination_lease',
  autoMigrate: true,
  synchronousCommit: 'on' as const,
  durableReleases: false,
  detectIncarnation: true,
});

/** {@link PostgresLeaseStoreOptions} checked, with defaults filled in (the connection apart). */
export interface ResolvedPostgresLeaseStoreOptions {
  readonly schema: string;
  readonly table: string;
  readonly autoMigrate: boolean;
  readonly synchronousCommit: 'on' | 'remote_apply' | 'server_default';
  readonly durableReleases: boolean;
  readonly detectIncarnation: boolean;
}

/** Checks the store's own options; the connection is checked by `resolveConnection`. */
export function resolvePostgresLeaseStoreOptions(
  options: PostgresLeaseStoreOptions,
): ResolvedPostgresLeaseStoreOptions {
  requireObject(options);
  const schema = checkIdentifier('schema', options.schema ?? DEFAULTS.schema);
  const table = checkIdentifier('table', options.table ?? DEFAULTS.table);
  const autoMigrate = booleanOption('autoMigrate', options.autoMigrate, DEFAULTS.autoMigrate);
  const sync = options.synchronousCommit ?? DEFAULTS.synchronousCommit;
  if (sync !== 'on' && sync !== 'remote_apply' && sync !== 'server_default') {
    throw invalidArgument(
      'synchronousCommit',
      "must be 'on', 'remote_apply' or 'server_default'",
      sync,
    );
  }
  const durableReleases = booleanOption(
    'durableReleases',
    options.durableReleases,
    DEFAULTS.durableReleases,
  );
  const detectIncarnation = booleanOption(
    'detectIncarnation',
    options.detectIncarnation,
    DEFAULTS.detectIncarnation,
  );
  if (
    options.onIncarnationChange !== undefined &&
    typeof options.onIncarnationChange !== 'function'
  ) {
    throw invalidArgument('onIncarnationChange', 'must be a function', options.onIncarnationChange);
  }
  return {
    schema,
    table,
    autoMigrate,
    synchronousCommit: sync,
    durableReleases,
    detectIncarnation,
  };
}
