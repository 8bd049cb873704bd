import { booleanOption, requireObject } from '../../core/runtime/options.js';
import { invalidArgument } from '../../core/errors.js';
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
}

/** The defaults of {@link PostgresLeaseStoreOptions}. */
export const DEFAULTS = Object.freeze({
  schema: 'public',
  table: 'coordination_lease',
  autoMigrate: true,
  synchronousCommit: 'on' as const,
  durableReleases: false,
});

/** {@link PostgresLeaseStoreOptions} checked, with defaults filled in (the connection apart). */
export interface ResolvedPostgresLeaseStoreOptions {
  readonly schema: string;
  readonly table: string;
  readonly autoMigrate: boolean;
  readonly synchronousCommit: 'on' | 'remote_apply' | 'server_default';
  readonly durableReleases: boolean;
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
  return { schema, table, autoMigrate, synchronousCommit: sync, durableReleases };
}
