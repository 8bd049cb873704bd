import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runsPerArm } from '../../support/fault-env.js';
import { tempDir } from '../../support/tmp.js';
import { killProcess, spawnGateway, spawnWriter, startUpstream, type Upstream } from './support.js';

// The article's stale-owner story over real processes: A acquires (token n) and is SIGSTOPped
// past its TTL just before it publishes; B acquires (n+1) and publishes through the gateway;
// A resumes and publishes. The upstream's own request log is the source of truth.

describe('gateway: the paused holder, real processes (SIGSTOP)', () => {
  let upstream: Upstream;
  let gateway: Awaited<ReturnType<typeof spawnGateway>>;
  const tmp = tempDir('gw-stale');
  before(async () => {
    upstream = await startUpstream();
    gateway = await spawnGateway([
      '--upstream',
      upstream.url,
      '--route',
      'PUT /reports/:id=report/{id}',
      '--marks',
      `sqlite:${tmp.dir}/marks.db`,
    ]);
  });
  after(async () => {
    await killProcess(gateway.cli.child, gateway.cli.exited);
    await upstream.close();
    tmp.remove();
  });

  it(
    'fenced: A gets 409 stale_fence and the upstream saw only B; unfenced control: A lands after B',
    { timeout: 600_000 },
    async () => {
      const runs = runsPerArm(3, 20);
      const landed = { fenced: 0, unfenced: 0 };
      for (let i = 0; i < runs; i++) {
        for (const fenced of [true, false]) {
          const id = `r${i}-${fenced ? 'f' : 'u'}`;
          const path = `/reports/${id}`;
          const target = (fenced ? gateway.url : upstream.url) + path;
          const env = {
            LEASE_STORE: `${tmp.dir}/leases.db`,
            LEASE_KEY: `report/${id}`,
            TARGET_URL: target,
            LEASE_TTL_MS: '1000',
          };
          const a = spawnWriter(env);
          let b: ReturnType<typeof spawnWriter> | undefined;
          try {
            const aGot = await a.next();
            assert.equal(aGot['event'], 'acquired');
            // A stops between its last check and its publish; its publish order waits in the pipe.
            a.child.kill('SIGSTOP');
            a.send('write A');
            b = spawnWriter(env);
            const bGot = await b.next();
            assert.equal(
              bGot['event'],
              'acquired',
              'B gets the lease once A’s expired (store clock)',
            );
            assert.ok(BigInt(bGot['token'] as string) > BigInt(aGot['token'] as string));
            b.send('write B');
            const bWrote = await b.next();
            assert.equal(bWrote['status'], 200);
            a.child.kill('SIGCONT');
            const aWrote = await a.next();
            const bodies = upstream.log.filter((e) => e.path === path).map((e) => e.body);
            if (fenced) {
              assert.equal(aWrote['status'], 409);
              assert.equal(aWrote['code'], 'stale_fence');
              assert.equal(aWrote['mark'], bGot['token']);
              assert.deepEqual(bodies, ['B'], 'the upstream never saw A');
            } else {
              assert.equal(aWrote['status'], 200);
            }
            if (bodies.at(-1) === 'A') landed[fenced ? 'fenced' : 'unfenced']++;
          } finally {
            a.send('quit');
            b?.send('quit');
            await killProcess(a.child, a.exited);
            if (b) await killProcess(b.child, b.exited);
          }
        }
      }
      console.log(
        `gateway F1 story: runs per arm ${runs}; stale writes landed: fenced ${landed.fenced}, unfenced control ${landed.unfenced}`,
      );
      assert.equal(landed.fenced, 0, 'stale_writes_accepted through the gateway');
      assert.ok(
        landed.unfenced / runs >= 0.95,
        `control arm showed the anomaly in ${landed.unfenced}/${runs} runs`,
      );
    },
  );
});
