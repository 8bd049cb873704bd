import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { PG_URL } from '../../support/postgres.js';
import { pythonWith, ReportDomain } from './domain.js';

const EXAMPLES = fileURLToPath(
  new URL('../../../../examples/fence-in-transaction/', import.meta.url),
);

/** Runs an example as a user would; its standard output. */
function run(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')}: ${r.stdout}${r.stderr}`);
  return r.stdout;
}

/**
 * The examples for other languages (examples/fence-in-transaction/): psql alone and Python
 * with psycopg, each calling the fence's SQL function in its own transaction.
 */
describe('the fence inside your own transaction, from psql and Python', () => {
  const domain = new ReportDomain();
  before(() => domain.setUp());
  after(() => domain.tearDown());

  const psql = (scope: string, token: string, body: string): string =>
    run('psql', [
      PG_URL,
      '-X',
      '-q',
      '-v',
      `schema=${domain.schema}`,
      '-v',
      `scope=${scope}`,
      '-v',
      `token=${token}`,
      '-v',
      `body=${body}`,
      '-f',
      `${EXAMPLES}psql/write-report.sql`,
    ]);

  it('psql: applies token 42, refuses 41 with the report row unchanged', async () => {
    const s = 'report/psql';
    assert.match(psql(s, '42', 'by 42'), /^fence: applied$/m);
    assert.match(psql(s, '41', "by 41's writer"), /^fence: stale_fence$/m);
    assert.deepEqual(await domain.report(s), { body: 'by 42', token: '42' });
    assert.equal(await domain.mark(s), 42n);
    assert.match(psql(s, '43', 'by 43'), /^fence: applied$/m);
    assert.deepEqual(await domain.report(s), { body: 'by 43', token: '43' });
  });

  const python = (args: string[]): string =>
    run(pythonWith('psycopg'), [
      `${EXAMPLES}python/psycopg_write.py`,
      PG_URL,
      domain.schema,
      ...args,
    ]).trim();

  it('python (psycopg): applies, refuses a stale token with the row unchanged', async () => {
    const s = 'report/python';
    assert.equal(python([s, '42', 'by 42']), 'applied');
    assert.equal(python([s, '41', 'by 41']), 'stale_fence 42');
    assert.deepEqual(await domain.report(s), { body: 'by 42', token: '42' });
    assert.equal(await domain.mark(s), 42n);
  });

  it('python (psycopg): a transaction rolled back after applied leaves the mark where it was', async () => {
    const s = 'report/python-rollback';
    assert.equal(python([s, '5', 'by 5']), 'applied');
    assert.equal(python([s, '9', 'by 9', '--roll-back']), 'applied');
    assert.equal(await domain.mark(s), 5n);
    assert.deepEqual(await domain.report(s), { body: 'by 5', token: '5' });
    assert.equal(python([s, '7', 'by 7']), 'applied');
  });
});
