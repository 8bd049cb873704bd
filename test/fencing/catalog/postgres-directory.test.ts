import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Catalog } from '../../../src/fencing/catalog/catalog.js';
import { DirectoryObjectStore } from '../../../src/fencing/catalog/objects/directory.js';
import { PostgresPointerStore } from '../../../src/fencing/catalog/pointers/postgres/index.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { tempDir } from '../../support/tmp.js';
import { catalogSuite } from './suite.js';

catalogSuite('PostgreSQL pointers × directory objects', () => {
  const tmp = tempDir('catalog-pg');
  const schema = uniqueSchema('catalog');
  const root = join(tmp.dir, 'objects');
  const objects = new DirectoryObjectStore({ root });
  const catalog = new Catalog({
    pointers: new PostgresPointerStore({ connectionString: PG_URL, schema, maxConnections: 4 }),
    objects,
  });
  const strict: Catalog[] = [];
  return Promise.resolve({
    catalog,
    objects,
    putRaw: (key: string, body: string) => {
      const p = join(root, ...key.split('/'));
      mkdirSync(dirname(p), { recursive: true });
      writeFileSync(p, body);
      return Promise.resolve();
    },
    strict: () => {
      const c = new Catalog({
        pointers: new PostgresPointerStore({
          connectionString: PG_URL,
          schema,
          tablePrefix: 'strict_catalog',
          policy: '>',
          maxConnections: 2,
        }),
        objects,
      });
      strict.push(c);
      return Promise.resolve(c);
    },
    close: async () => {
      await catalog.close();
      await Promise.all(strict.map((c) => c.close()));
      await dropSchema(schema);
      tmp.remove();
    },
  });
});
