import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, describe, it } from 'node:test';
import { CLI } from '../support/cli.js';
import { tempDir } from '../support/tmp.js';

/** Reports every resolution of pg or the AWS SDK on stderr (Node runs it for every import). */
const HOOK = `
import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(\`
  export async function resolve(specifier, context, next) {
    if (/^(pg|@aws-sdk\\\\/client-s3)(\\\\/|$)/.test(specifier)) process.stderr.write('DRIVER ' + specifier + '\\\\n');
    return next(specifier, context);
  }\`));
`;

describe('leasehold/catalog loads drivers lazily', () => {
  const tmp = tempDir('catalog-lazy');
  after(() => tmp.remove());

  it('a SQLite + directory user never loads pg or @aws-sdk/client-s3; the S3 store loads the SDK on first use', () => {
    const index = pathToFileURL(join(CLI, '..', '..', 'fencing', 'catalog', 'index.js')).href;
    const script = (s3: boolean): string => `
      const { Catalog, SqlitePointerStore, DirectoryObjectStore, S3ObjectStore } = await import(${JSON.stringify(index)});
      const c = new Catalog({ pointers: new SqlitePointerStore({ path: 'c.db' }), objects: new DirectoryObjectStore({ root: 'o' }) });
      const lease = { key: 'report/july', leaseId: 'a7', token: 41n, remainingMs: () => 1000 };
      const s = await c.stage(lease, 'reports/july', 'x');
      const p = await c.publish(lease, 'reports/july', s.handle);
      if (p.status !== 'applied') throw new Error(p.status);
      // Nothing listens on port 1: the get fails, after loading the SDK.
      if (${s3}) await new S3ObjectStore({ bucket: 'b', clientConfig: { region: 'us-east-1', endpoint: 'http://127.0.0.1:1', credentials: { accessKeyId: 'x', secretAccessKey: 'y' } } }).get('reports/july@41-' + '0'.repeat(24)).catch(() => undefined);
      await c.close();`;
    const run = (s3: boolean): { code: number | null; loaded: string[]; out: string } => {
      const r = spawnSync(
        process.execPath,
        [
          '--import',
          `data:text/javascript,${encodeURIComponent(HOOK)}`,
          '--input-type=module',
          '-e',
          script(s3),
        ],
        { cwd: tmp.dir, encoding: 'utf8', timeout: 60_000 },
      );
      return {
        code: r.status,
        loaded: [...r.stderr.matchAll(/^DRIVER (\S+)/gm)].map((m) => m[1]!),
        out: r.stdout + r.stderr,
      };
    };
    const plain = run(false);
    assert.equal(plain.code, 0, plain.out);
    assert.deepEqual(plain.loaded, []);
    const withS3 = run(true);
    assert.equal(withS3.code, 0, withS3.out);
    assert.ok(
      withS3.loaded.includes('@aws-sdk/client-s3') && !withS3.loaded.includes('pg'),
      withS3.out,
    );
  });
});
