import { join } from 'node:path';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Catalog } from '../../../src/fencing/catalog/catalog.js';
import { S3ObjectStore } from '../../../src/fencing/catalog/objects/s3.js';
import { SqlitePointerStore } from '../../../src/fencing/catalog/pointers/sqlite/store.js';
import { startRadosGateway } from '../../support/ceph-rgw.js';
import { tempDir } from '../../support/tmp.js';
import { catalogSuite } from './suite.js';

// The S3 adapter against an S3-compatible server that honours If-None-Match on PutObject:
// Ceph's RADOS Gateway, started here on loopback. The whole suite, with no stated gap: a
// second put of an existing key is refused (412 Precondition Failed) and the first bytes stay.
catalogSuite('SQLite pointers × S3 objects (Ceph RADOS Gateway)', async () => {
  const tmp = tempDir('catalog-rgw');
  const rgw = await startRadosGateway('catalog');
  const client = new S3Client({ ...rgw.clientConfig, requestChecksumCalculation: 'WHEN_REQUIRED' });
  const objects = new S3ObjectStore({ bucket: 'catalog', prefix: 'reports-store/', client });
  const path = join(tmp.dir, 'catalog.db');
  const catalog = new Catalog({ pointers: new SqlitePointerStore({ path }), objects });
  const strict: Catalog[] = [];
  return {
    catalog,
    objects,
    putRaw: async (key: string, body: string) => {
      await client.send(
        new PutObjectCommand({ Bucket: 'catalog', Key: `reports-store/${key}`, Body: body }),
      );
    },
    strict: () => {
      const c = new Catalog({
        pointers: new SqlitePointerStore({ path, tablePrefix: 'strict_catalog', policy: '>' }),
        objects,
      });
      strict.push(c);
      return Promise.resolve(c);
    },
    close: async () => {
      await catalog.close();
      await Promise.all(strict.map((c) => c.close()));
      client.destroy();
      await rgw.stop();
      tmp.remove();
    },
  };
});
