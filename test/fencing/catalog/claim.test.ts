import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { LeaseClient } from '../../../src/core/client.js';
import { isLeaseholdError } from '../../../src/core/errors.js';
import { Catalog } from '../../../src/fencing/catalog/catalog.js';
import { DirectoryObjectStore } from '../../../src/fencing/catalog/objects/directory.js';
import { PostgresPointerStore } from '../../../src/fencing/catalog/pointers/postgres/index.js';
import { SqlitePointerStore } from '../../../src/fencing/catalog/pointers/sqlite/store.js';
import type { CatalogLease } from '../../../src/fencing/catalog/results.js';
import { MemoryLeaseStore } from '../../../src/stores/memory/store.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { tempDir } from '../../support/tmp.js';

// Catalog.claim on the PostgreSQL and SQLite pointer stores (claim before start, DESIGN §4, I9): a claim
// raises a name's mark with no pointer move — in the pointer row, or for a name never
// published in the fence row its first publish reads — so a stale owner's publish is refused
// before the new owner's first one. Under '>' the claimed token's one publish still passes.

const KEY = 'report/july';
const lease = (token: bigint): CatalogLease => ({
  key: KEY,
  leaseId: `lease-${token}`,
  token,
  remainingMs: () => 60_000,
});

for (const backend of ['PostgreSQL', 'SQLite'] as const)
  describe(`Catalog.claim (${backend} pointers)`, () => {
    const tmp = tempDir('catalog-claim');
    const schema = uniqueSchema('catalog_claim');
    const catalogs: Catalog[] = [];
    const pointers = (policy: '>=' | '>') => {
      const tablePrefix = policy === '>' ? 'strict_catalog' : 'leasehold_catalog';
      return backend === 'PostgreSQL'
        ? new PostgresPointerStore({
            connectionString: PG_URL,
            schema,
            tablePrefix,
            policy,
            maxConnections: 4,
          })
        : new SqlitePointerStore({ path: `${tmp.dir}/catalog.db`, tablePrefix, policy });
    };
    const open = (policy: '>=' | '>' = '>='): Catalog => {
      const c = new Catalog({
        pointers: pointers(policy),
        objects: new DirectoryObjectStore({
          root: `${tmp.dir}/objects-${policy === '>' ? 's' : 'n'}`,
        }),
      });
      catalogs.push(c);
      return c;
    };
    let catalog: Catalog;
    let strict: Catalog;
    let n = 0;
    const name = (): string => `reports/july-${++n}`;
    const publish = async (c: Catalog, nm: string, token: bigint, body = `by ${token}`) =>
      c.publish(lease(token), nm, (await c.stage(lease(token), nm, body)).handle);

    before(() => {
      catalog = open('>=');
      strict = open('>');
    });
    after(async () => {
      for (const c of catalogs) await c.close();
      await dropSchema(schema);
      tmp.remove();
    });

    it('a name never published: the claim at 42 refuses 41’s first publish; 42 publishes', async () => {
      const nm = name();
      assert.deepEqual(await catalog.claim(nm, 42n), { status: 'applied' });
      assert.deepEqual(await publish(catalog, nm, 41n), {
        status: 'stale_fence',
        highWaterMark: 42n,
      });
      assert.equal(
        await catalog.head(nm),
        undefined,
        'nothing visible: the claim moves no pointer',
      );
      assert.equal((await publish(catalog, nm, 42n)).status, 'applied');
      assert.equal((await publish(catalog, nm, 42n)).status, 'applied', "'>=': again");
    });

    it('a published name: 41 is visible, the claim at 42 keeps it visible and refuses 41 from now on', async () => {
      const nm = name();
      assert.equal((await publish(catalog, nm, 41n)).status, 'applied');
      assert.deepEqual(await catalog.claim(nm, 42n), { status: 'applied' });
      assert.deepEqual(await catalog.claim(nm, 42n), { status: 'applied' }, 'idempotent');
      assert.equal((await catalog.head(nm))?.token, 41n);
      assert.deepEqual(await publish(catalog, nm, 41n), {
        status: 'stale_fence',
        highWaterMark: 42n,
      });
      assert.equal((await publish(catalog, nm, 43n)).status, 'applied');
      assert.deepEqual(await catalog.claim(nm, 42n), { status: 'stale_fence', highWaterMark: 43n });
    });

    it("'>' policy: the claim does not use the grant's one publish; a claim after it is stale", async () => {
      for (const published of [false, true]) {
        const nm = name();
        if (published) assert.equal((await publish(strict, nm, 40n)).status, 'applied');
        assert.deepEqual(await strict.claim(nm, 42n), { status: 'applied' });
        assert.deepEqual(await strict.claim(nm, 42n), { status: 'applied' }, 'idempotent');
        assert.equal((await publish(strict, nm, 41n)).status, 'stale_fence');
        assert.equal((await publish(strict, nm, 42n)).status, 'applied');
        assert.equal((await publish(strict, nm, 42n)).status, 'stale_fence');
        assert.deepEqual(await strict.claim(nm, 42n), {
          status: 'stale_fence',
          highWaterMark: 42n,
        });
      }
    });

    it('a claim racing a first publish still raises the mark the next publish reads', async () => {
      for (let i = 0; i < 10; i++) {
        const nm = name();
        const staged = await catalog.stage(lease(42n), nm, 'by 42');
        const [claimed, published] = await Promise.all([
          catalog.claim(nm, 43n),
          catalog.publish(lease(42n), nm, staged.handle),
        ]);
        assert.equal(claimed.status, 'applied');
        // Either order is fine; what matters is that 43's claim holds afterwards.
        assert.ok(['applied', 'stale_fence'].includes(published.status), published.status);
        assert.equal((await publish(catalog, nm, 42n)).status, 'stale_fence', `round ${i}`);
      }
    });

    it('acquire with fences: [{ fence: catalog, scope: name }] claims the lease token on the name', async () => {
      const client = new LeaseClient({ store: new MemoryLeaseStore() });
      const nm = name();
      try {
        // Token 3: two grants before it.
        for (let i = 0; i < 2; i++) {
          const g = await client.acquire(KEY, { ttl: 5000 });
          if (g.status === 'acquired') await g.lease.release();
        }
        const r = await client.acquire(KEY, { ttl: 5000, fences: [{ fence: catalog, scope: nm }] });
        assert.equal(r.status, 'acquired');
        if (r.status !== 'acquired') return;
        assert.equal(r.lease.token, 3n);
        assert.deepEqual(await catalog.claim(nm, r.lease.token - 1n), {
          status: 'stale_fence',
          highWaterMark: r.lease.token,
        });
      } finally {
        await client.close();
      }
    });

    it('a claim is durable: after the catalog is closed and opened again, 41 is still refused and 42 publishes', async () => {
      const nm = name();
      const first = open('>=');
      assert.equal((await publish(first, nm, 41n)).status, 'applied');
      assert.deepEqual(await first.claim(nm, 42n), { status: 'applied' });
      const never = name();
      assert.deepEqual(await first.claim(never, 42n), { status: 'applied' });
      await first.close();
      const again = open('>=');
      assert.deepEqual(await publish(again, nm, 41n), {
        status: 'stale_fence',
        highWaterMark: 42n,
      });
      assert.deepEqual(await publish(again, never, 41n), {
        status: 'stale_fence',
        highWaterMark: 42n,
      });
      assert.equal((await publish(again, nm, 42n)).status, 'applied');
      assert.equal((await again.head(nm))?.token, 42n);
    });

    it('bad names and tokens throw ERR_INVALID_ARGUMENT', async () => {
      await assert.rejects(catalog.claim('', 5n), (e: unknown) =>
        isLeaseholdError(e, 'ERR_INVALID_ARGUMENT'),
      );
      await assert.rejects(catalog.claim(name(), '007'), (e: unknown) =>
        isLeaseholdError(e, 'ERR_INVALID_ARGUMENT'),
      );
    });
  });
