import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { formatReport } from '../../src/check/checker.js';
import { RealHarness } from '../../src/fault/harness.js';
import {
  ArmTally,
  faultStores,
  runsPerArm,
  FAULT_TIMEOUT_MS,
  STORE_START_TIMEOUT_MS,
} from '../support/fault-env.js';
import { logCount, ResourceServer } from '../support/resource-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { eventually } from '../support/time.js';
import { tempDir } from '../support/tmp.js';

// F3: A's write to the resource is held in the network (a TCP proxy) past its lease. A gives
// up on it and releases; B takes the lease and writes; then the proxy delivers A's write —
// twice, as a network that re-sends would.

// A fault of the resource path, not of the store: SQLite unless LEASEHOLD_FAULT_STORES asks.
for (const store of faultStores(['sqlite'])) {
  const TTL = Math.max(1000, store.minTtlMs);
  describe(`F3 delayed write through a TCP proxy, real processes (${store.name})`, () => {
    before(() => store.start(), { timeout: STORE_START_TIMEOUT_MS });
    after(() => store.stop());

    it(
      'the held write that arrives after the next holder wrote is rejected twice (fenced) or lands (unfenced)',
      { timeout: FAULT_TIMEOUT_MS },
      async () => {
        const runs = runsPerArm(1, 10);
        // The held write and its duplicate: both reach the resource after B's write.
        const arms = new ArmTally(runs, { staleWritesPerFencedRun: 2 });
        for (let i = 0; i < runs; i++) {
          for (const fencing of [true, false]) {
            const tmp = tempDir('f3');
            const resourcePath = `${tmp.dir}/resource.db`;
            const run = await store.run(tmp.dir);
            const h = new RealHarness({ storeUrl: run.workerUrl, resourcePath });
            h.meta({
              scenario: 'F3',
              ttlMs: TTL,
            });
            const server = await ResourceServer.start(resourcePath);
            const proxy = await TcpProxy.start({ host: '127.0.0.1', port: server.port });
            try {
              const [a, b] = await Promise.all([h.spawn('A'), h.spawn('B')]);
              const ga = await h.acquireGranted(a, 'job', {
                ttlMs: TTL,
                waitMs: 0,
                renewEveryMs: TTL / 4,
              });
              assert.equal(ga.status, 'ok');
              proxy.hold('up');
              h.fault('hold_write', 'A', 'proxy holds client→resource bytes');
              const aw = await h.netWrite(a, {
                port: proxy.port,
                scope: 'job',
                value: 'A',
                fenced: fencing,
                token: ga.token!,
                timeoutMs: 300,
              });
              assert.equal(aw.status, 'unknown');
              assert.ok(proxy.heldBytes('up') > 0);
              await h.release(a, 'job', ga.token!, ga.lease!);
              const gb = await h.acquire(b, 'job', {
                ttlMs: TTL,
                waitMs: 5 * TTL,
                renewEveryMs: TTL / 4,
              });
              assert.equal(gb.status, 'ok');
              const bw = await h.netWrite(b, {
                port: server.port,
                scope: 'job',
                value: 'B',
                fenced: fencing,
                token: gb.token!,
                timeoutMs: 5000,
              });
              assert.equal(bw.status, 'applied');
              proxy.release('up', { duplicate: true });
              await eventually('the held write and its duplicate to reach the resource', () =>
                logCount(resourcePath) >= 3 ? true : undefined,
              );
              await h.release(b, 'job', gb.token!, gb.lease!);
              const { report } = await h.finish();
              const where = formatReport(report);
              arms.add(fencing, report, where);
              assert.equal(report.invariants.I5.status, 'ok', where);
              if (fencing) assert.equal(report.figures.staleWritesRejected, 2, where);
            } finally {
              await proxy.close();
              await Promise.all(h.workers.map((w) => w.kill()));
              await server.close();
              await run.close();
              tmp.remove();
            }
          }
        }
        arms.conclude(`real F3 ${store.name}`);
      },
    );

    it(
      'a write delivered twice under a valid lease is applied once, then answered duplicate',
      { timeout: 60_000 },
      async () => {
        const tmp = tempDir('f3dup');
        const resourcePath = `${tmp.dir}/resource.db`;
        const run = await store.run(tmp.dir);
        const h = new RealHarness({ storeUrl: run.workerUrl, resourcePath });
        const server = await ResourceServer.start(resourcePath);
        const proxy = await TcpProxy.start({ host: '127.0.0.1', port: server.port });
        try {
          const a = await h.spawn('A');
          const ga = await h.acquireGranted(a, 'job', { ttlMs: 5000, waitMs: 0 });
          proxy.hold('up');
          const sent = h.netWrite(a, {
            port: proxy.port,
            scope: 'job',
            value: 'A',
            fenced: true,
            token: ga.token!,
            timeoutMs: 5000,
          });
          await eventually('held', () => (proxy.heldBytes('up') > 0 ? true : undefined));
          proxy.release('up', { duplicate: true });
          assert.equal((await sent).status, 'applied');
          await eventually('both deliveries', () =>
            logCount(resourcePath) >= 2 ? true : undefined,
          );
          const { history } = await h.finish();
          const actions = history
            .filter((e) => e.type === 'resource')
            .map((e) => (e.type === 'resource' ? e.action : ''));
          assert.deepEqual(actions, ['applied', 'duplicate']);
        } finally {
          await proxy.close();
          await Promise.all(h.workers.map((w) => w.kill()));
          await server.close();
          await run.close();
          tmp.remove();
        }
      },
    );
  });
}
