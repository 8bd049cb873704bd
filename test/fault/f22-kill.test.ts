import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { formatReport } from '../../src/check/checker.js';
import { RealHarness } from '../../src/fault/harness.js';
import {
  FigureTally,
  faultStores,
  runsPerArm,
  FAULT_TIMEOUT_MS,
  STORE_START_TIMEOUT_MS,
} from '../support/fault-env.js';
import { elapse } from '../support/time.js';
import { tempDir } from '../support/tmp.js';

// F22: the holder is killed (SIGKILL) mid critical section; a waiter must get the key within
// TTL + ε of the holder's last renewal (store clock), and the dead holder's token is never reused.

for (const store of faultStores()) {
  // TTL 1 s where the store allows it (etcd: 2 s, and its key frees up to the store's declared
  // expiry lag later: session headroom and expiry check). 1 s more for a loaded machine.
  const TTL = Math.max(1000, store.minTtlMs);
  describe(`F22 holder killed, real processes (${store.name})`, () => {
    before(() => store.start(), { timeout: STORE_START_TIMEOUT_MS });
    after(() => store.stop());

    it(
      "a waiting worker takes over within TTL (+ the store's declared expiry lag) + 1 s of the last renewal, with a higher token",
      { timeout: FAULT_TIMEOUT_MS },
      async () => {
        const SLACK_MS = store.expiryLagMs + 1000;
        const tmp = tempDir('f22');
        const run = await store.run(tmp.dir);
        const h = new RealHarness({
          storeUrl: run.workerUrl,
          resourcePath: `${tmp.dir}/resource.db`,
        });
        h.meta({
          scenario: 'F22',
          ttlMs: TTL,
          livenessBoundMs: SLACK_MS,
        });
        const tally = new FigureTally();
        try {
          const kills = runsPerArm(store.networked ? 3 : 4, 40);
          let holder = await h.spawn('w0');
          let held = await h.acquireGranted(holder, 'job', {
            ttlMs: TTL,
            waitMs: 0,
            renewEveryMs: TTL / 4,
          });
          assert.equal(held.status, 'ok');
          for (let i = 1; i <= kills; i++) {
            const waiter = await h.spawn(`w${i}`);
            const waiting = h.acquire(waiter, 'job', {
              ttlMs: TTL,
              waitMs: 10 * TTL,
              renewEveryMs: TTL / 4,
            });
            await h.write(holder, {
              scope: 'job',
              value: `w${i - 1}`,
              fenced: true,
              check: true,
              token: held.token!,
            });
            await elapse(100 + Math.floor(Math.random() * 400));
            h.fault('crash', holder.name, 'SIGKILL');
            holder.signal('SIGKILL');
            await holder.waitExit();
            const next = await waiting;
            assert.equal(next.status, 'ok');
            assert.ok(BigInt(next.token!) > BigInt(held.token!));
            holder = waiter;
            held = next;
          }
          const { report } = await h.finish();
          tally.add(report.figures);
          console.log(tally.line(`real F22 ${store.name} holder killed (${kills} kills)`));
          assert.equal(report.valid, true, formatReport(report));
          assert.equal(report.invariants.I8.status, 'ok', formatReport(report));
          // The store's answers (renewals cut off by SIGKILL are `:info`) are linearizable.
          assert.equal(report.invariants.I5.status, 'ok', formatReport(report));
          assert.equal(report.figures.takeoverMs.length, kills);
          const p99 = tally.p99()!;
          assert.ok(p99 <= TTL + SLACK_MS, `takeover p99 ${p99}ms > ${TTL + SLACK_MS}ms`);
          assert.ok(
            Math.min(...report.figures.takeoverMs) >= TTL - 300,
            'took over before the lease could have expired',
          );
        } finally {
          await Promise.all(h.workers.map((w) => w.kill()));
          await run.close();
          tmp.remove();
        }
      },
    );
  });
}
