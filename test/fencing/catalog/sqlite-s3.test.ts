import { join } from 'node:path';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Catalog } from '../../../src/fencing/catalog/catalog.js';
import { S3ObjectStore } from '../../../src/fencing/catalog/objects/s3.js';
import { SqlitePointerStore } from '../../../src/fencing/catalog/pointers/sqlite/store.js';
import { startS3rver } from '../../support/s3rver.js';
import { tempDir } from '../../support/tmp.js';
import { catalogSuite } from './suite.js';

// The S3 adapter against a real S3-protocol server (s3rver) started here on a free port.
// s3rver ignores If-None-Match on PutObject, so the store-level overwrite refusal is skipped
// visibly (sqlite-rgw.test.ts checks it on a server that honours the header); the catalog's
// own guarantees (unique handles, fenced pointer) are all checked.
catalogSuite(
  'SQLite pointers × S3 objects (s3rver)',
  async () => {
    const tmp = tempDir('catalog-s3');
    const s3 = await startS3rver('catalog');
    const client = new S3Client({
      ...s3.clientConfig,
      requestChecksumCalculation: 'WHEN_REQUIRED',
    });
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
        await s3.stop();
        tmp.remove();
      },
    };
  },
  { refusesOverwrite: 's3rver 3.7 ignores If-None-Match on PutObject and overwrites' },
);
