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

// F22 with its unfenced control arm: the holder is killed (SIGKILL) in the middle of its
// critical section, while its write to the resource is still in the network (a TCP proxy
// holds it, and keeps it when the sender dies). The next holder takes over after the store
// expiry and writes; then the dead holder's write arrives. Fenced: rejected. Unfenced: it
// overwrites the new holder's result — a crash does not make a holder's last write safe.

// A fault of the holder and the resource path: SQLite unless LEASEHOLD_FAULT_STORES asks.
for (const store of faultStores(['sqlite'])) {
  const TTL = Math.max(1000, store.minTtlMs);
  describe(`F22 holder killed with its write in flight, real processes (${store.name})`, () => {
    before(() => store.start(), { timeout: STORE_START_TIMEOUT_MS });
    after(() => store.stop());

    it(
      "the dead holder's write that arrives after the takeover is rejected (fenced) or lands over the new holder's (unfenced)",
      { timeout: FAULT_TIMEOUT_MS },
      async () => {
        const runs = runsPerArm(2, 20);
        const arms = new ArmTally(runs);
        const bound = TTL + store.expiryLagMs + 1000;
        for (let i = 0; i < runs; i++) {
          for (const fencing of [true, false]) {
            const tmp = tempDir('f22w');
            const resourcePath = `${tmp.dir}/resource.db`;
            const run = await store.run(tmp.dir);
            const h = new RealHarness({ storeUrl: run.workerUrl, resourcePath });
            h.meta({ scenario: 'F22', ttlMs: TTL, livenessBoundMs: store.expiryLagMs + 1000 });
            const server = await ResourceServer.start(resourcePath);
            const proxy = await TcpProxy.start({ host: '127.0.0.1', port: server.port });
            proxy.keepHeldRequests();
            try {
              const [a, b] = await Promise.all([h.spawn('A'), h.spawn('B')]);
              const ga = await h.acquireGranted(a, 'job', {
                ttlMs: TTL,
                waitMs: 0,
                renewEveryMs: TTL / 4,
              });
              assert.equal(ga.status, 'ok');
              const bAcquire = h.acquire(b, 'job', {
                ttlMs: TTL,
                waitMs: 5 * TTL,
                renewEveryMs: TTL / 4,
              });
              proxy.hold('up');
              h.fault('hold_write', 'A', 'proxy holds client→resource bytes');
              // Its answer never comes: the worker is killed with the write in flight.
              const aWrite = h
                .netWrite(a, {
                  port: proxy.port,
                  scope: 'job',
                  value: 'A',
                  fenced: fencing,
                  token: ga.token!,
                  timeoutMs: 30_000,
                })
                .then(
                  () => 'answered',
                  () => 'killed',
                );
              await eventually("A's write to be in the network", () =>
                proxy.heldBytes('up') > 0 ? true : undefined,
              );
              h.fault('crash', 'A', 'SIGKILL');
              a.signal('SIGKILL');
              await a.waitExit();
              assert.equal(await aWrite, 'killed');
              const gb = await bAcquire;
              assert.equal(gb.status, 'ok');
              assert.ok(BigInt(gb.token!) > BigInt(ga.token!));
              const bw = await h.netWrite(b, {
                port: server.port,
                scope: 'job',
                value: 'B',
                fenced: fencing,
                token: gb.token!,
                timeoutMs: 5000,
              });
              assert.equal(bw.status, 'applied');
              proxy.release('up');
              await eventually("the dead holder's write to reach the resource", () =>
                logCount(resourcePath) >= 2 ? true : undefined,
              );
              await h.release(b, 'job', gb.token!, gb.lease!);
              const { report } = await h.finish();
              const where = `run ${i} ${fencing ? 'fenced' : 'unfenced'}\n${formatReport(report)}`;
              for (const inv of ['I2', 'I3', 'I5', 'I7', 'I8'] as const)
                assert.equal(report.invariants[inv].status, 'ok', `${inv}\n${where}`);
              assert.equal(report.figures.takeoverMs.length, 1, where);
              assert.ok(report.figures.takeoverMs[0]! <= bound, where);
              arms.add(fencing, report, where);
            } finally {
              await proxy.close();
              await Promise.all(h.workers.map((w) => w.kill()));
              await server.close();
              await run.close();
              tmp.remove();
            }
          }
        }
        arms.conclude(`real F22 ${store.name} holder killed, write in flight`);
        const p99 = arms.fenced.p99();
        assert.ok(p99 !== undefined && p99 <= bound, `takeover p99 ${p99}ms > ${bound}ms`);
      },
    );
  });
}
