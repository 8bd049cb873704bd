import { join } from 'node:path';
import { Catalog } from '../../../src/fencing/catalog/catalog.js';
import { DirectoryObjectStore } from '../../../src/fencing/catalog/objects/directory.js';
import type { PointerStore } from '../../../src/fencing/catalog/pointer-store.js';
import { PostgresPointerStore } from '../../../src/fencing/catalog/pointers/postgres/index.js';
import { SqlitePointerStore } from '../../../src/fencing/catalog/pointers/sqlite/store.js';
import type { CatalogLease } from '../../../src/fencing/catalog/results.js';
import type {
  FenceHarness,
  FencePolicy,
  FenceWriteOutcome,
} from '../../../src/testing/fence-contract/index.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { tempDir } from '../../support/tmp.js';

/** A lease as the catalog reads it; the fence decides, so its local check always passes here. */
const leaseOf = (scope: string, token: bigint | string): CatalogLease => ({
  key: scope,
  leaseId: `fence-contract-${String(token)}`,
  token: token as bigint,
  remainingMs: () => 60_000,
});

/**
 * The catalog as a fence, through an adapter: the scope is the catalog name, a write stages
 * the value as a new object and publishes it with the token (the idempotency key passed to
 * publish), a claim is `Catalog.claim`. The data the resource accepted is the name's publish
 * history (oldest first), each entry's object read back from the object store: the catalog's
 * own record, not its answers. Each policy has its own tables (a pointer store has one policy).
 */
export function catalogFenceHarness(kind: 'sqlite' | 'postgres'): () => FenceHarness {
  return () => {
    const tmp = tempDir(`fence-contract-catalog-${kind}`);
    const schema = uniqueSchema('claims_fc_catalog');
    const pointers = (policy: FencePolicy): PointerStore => {
      const tablePrefix = policy === '>' ? 'strict_catalog' : 'leasehold_catalog';
      return kind === 'postgres'
        ? new PostgresPointerStore({
            connectionString: PG_URL,
            schema,
            tablePrefix,
            policy,
            maxConnections: 2,
          })
        : new SqlitePointerStore({ path: join(tmp.dir, 'catalog.db'), tablePrefix, policy });
    };
    return {
      name: `catalog (Catalog.publish, ${kind === 'postgres' ? 'PostgreSQL' : 'SQLite'} pointers)`,
      open(policy) {
        const objects = new DirectoryObjectStore({ root: join(tmp.dir, 'objects') });
        const catalog = new Catalog({ pointers: pointers(policy), objects });
        return {
          async write(scope, token, value, o): Promise<FenceWriteOutcome> {
            const lease = leaseOf(scope, token);
            const staged = await catalog.stage(lease, scope, value);
            const r = await catalog.publish(
              lease,
              scope,
              staged.handle,
              o?.idempotencyKey === undefined ? {} : { idempotencyKey: o.idempotencyKey },
            );
            if (r.status === 'applied' || r.status === 'duplicate') return { status: r.status };
            if (r.status === 'stale_fence') return r;
            throw new Error(`catalog publish answered ${r.status}`);
          },
          claim: (scope, token) => catalog.claim(scope, token),
          async accepted(scope) {
            const entries = (await catalog.history(scope, { limit: 10_000 })).reverse();
            return Promise.all(
              entries.map(async (e) => (await objects.get(e.handle))?.toString() ?? '(gone)'),
            );
          },
          close: () => catalog.close(),
        };
      },
      lacks: {
        'stale before duplicate':
          'a retried publish key below the mark answers duplicate: the pointer stores look the key up before the mark',
        'claimed mark under >':
          "under '>' a claim of token t stores the mark t - 1, so a refusal after it names t - 1",
      },
      async teardown() {
        if (kind === 'postgres') await dropSchema(schema);
        tmp.remove();
      },
    };
  };
}
