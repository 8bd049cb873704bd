import { join } from 'node:path';
import { Catalog } from '../../src/fencing/catalog/catalog.js';
import { DirectoryObjectStore } from '../../src/fencing/catalog/objects/directory.js';
import { SqlitePointerStore } from '../../src/fencing/catalog/pointers/sqlite/store.js';
import { tempDir } from '../support/tmp.js';
import { catalogSuite } from './suite.js';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

catalogSuite('SQLite pointers × directory objects', () => {
  const tmp = tempDir('catalog-sqlite');
  const path = join(tmp.dir, 'catalog.db');
  const root = join(tmp.dir, 'objects');
  const objects = new DirectoryObjectStore({ root });
  const catalog = new Catalog({ pointers: new SqlitePointerStore({ path }), objects });
  return Promise.resolve({
    catalog,
    objects,
    putRaw: (key: string, body: string) => {
      const p = join(root, ...key.split('/'));
      mkdirSync(dirname(p), { recursive: true });
      writeFileSync(p, body);
      return Promise.resolve();
    },
    strict: () =>
      Promise.resolve(
        new Catalog({
          pointers: new SqlitePointerStore({ path, tablePrefix: 'strict_catalog', policy: '>' }),
          objects,
        }),
      ),
    close: async () => {
      await catalog.close();
      tmp.remove();
    },
  });
});
