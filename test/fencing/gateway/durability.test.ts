import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { tempDir } from '../../support/tmp.js';
import { killProcess, spawnGateway, startUpstream } from './support.js';

describe('gateway durability: kill -9 right after an accept, then restart', () => {
  it(
    'token n is still rejected after the gateway was killed having accepted n+1',
    { timeout: 120_000 },
    async () => {
      const tmp = tempDir('gw-kill');
      const up = await startUpstream();
      const args = [
        '--upstream',
        up.url,
        '--route',
        'PUT /reports/:id=report/{id}',
        '--marks',
        `sqlite:${tmp.dir}/marks.db`,
      ];
      try {
        const first = await spawnGateway(args);
        const put = (base: string, token: string, body: string) =>
          fetch(`${base}/reports/july`, {
            method: 'PUT',
            headers: { 'fencing-token': token },
            body,
          });
        assert.equal((await put(first.url, '41', 'n')).status, 200);
        assert.equal((await put(first.url, '42', 'n+1')).status, 200);
        // SIGKILL the moment the accept was answered: no shutdown path runs.
        first.cli.child.kill('SIGKILL');
        assert.equal(await first.cli.exited, 137);
        const second = await spawnGateway(args);
        try {
          const late = await put(second.url, '41', 'late n');
          assert.equal(late.status, 409);
          assert.equal(
            ((await late.json()) as { error: { code: string } }).error.code,
            'stale_fence',
          );
          assert.equal(late.headers.get('fencing-mark'), '42');
          assert.deepEqual(
            up.log.map((e) => e.body),
            ['n', 'n+1'],
          );
        } finally {
          await killProcess(second.cli.child, second.cli.exited);
        }
      } finally {
        await up.close();
        tmp.remove();
      }
    },
  );

  it(
    'a second gateway process on the same SQLite marks file refuses to start',
    { timeout: 60_000 },
    async () => {
      const tmp = tempDir('gw-excl');
      const up = await startUpstream();
      const args = [
        '--upstream',
        up.url,
        '--route',
        'PUT /r/:id=r/{id}',
        '--marks',
        `sqlite:${tmp.dir}/marks.db`,
      ];
      const first = await spawnGateway(args);
      try {
        const { spawnCli } = await import('../../support/cli.js');
        const second = spawnCli(['gateway', '--listen', '127.0.0.1:0', ...args]);
        assert.notEqual(await second.exited, 0);
        assert.match(second.stderr(), /held by another process/);
      } finally {
        await killProcess(first.cli.child, first.cli.exited);
        await up.close();
        tmp.remove();
      }
    },
  );
});
