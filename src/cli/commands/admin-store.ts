import { parsePostgresStoreUrl } from '../../stores/open-store.js';
import { DEFAULT_STORE, UsageError } from '../common.js';

/** The schemes whose schema `migrate` and `epoch` manage (only PostgreSQL has either). */
const ADMIN_SCHEMES = ['postgres', 'postgresql'];

/** Where an administrative command (`migrate`, `epoch`) acts: a PostgreSQL lease table. */
export interface AdminTarget {
  readonly connectionString: string;
  readonly schema?: string;
  readonly table?: string;
}

/**
 * Resolves `--store` (or `LEASEHOLD_STORE`) for `migrate` / `epoch`. Any other scheme is a
 * usage error naming what is supported and why the others need nothing.
 */
export function adminTarget(command: string, store: string | undefined): AdminTarget {
  const url = store ?? process.env['LEASEHOLD_STORE'] ?? DEFAULT_STORE;
  const scheme = /^([a-z][a-z0-9+.-]*):/.exec(url)?.[1] ?? 'sqlite';
  if (!ADMIN_SCHEMES.includes(scheme)) {
    throw new UsageError(
      `${command} supports postgres:// and postgresql:// stores only, not ${scheme}: ` +
        (command === 'migrate'
          ? '(and sqlite:; memory, Redis, etcd and servers need no migration)'
          : '(a fencing epoch is needed only for a PostgreSQL table restored from a backup)'),
    );
  }
  return parsePostgresStoreUrl(url);
}
