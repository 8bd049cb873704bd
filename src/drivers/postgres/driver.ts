import type * as PgModule from 'pg';
import { requirePeer } from '../../core/runtime/peer-packages.js';

/**
 * The pg driver, loaded when a PostgreSQL store or fence is first imported: without pg that
 * import fails with an error naming the package and the command that installs it (decision
 * 012). Its own module, so that no declaration of the store refers to pg's types.
 */
export const pg = requirePeer<typeof PgModule>(
  'pg',
  'leasehold/postgres and leasehold/fencing/postgres',
);
