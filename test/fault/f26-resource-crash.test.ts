import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { describe, it } from 'node:test';
import { SqliteFence } from '../../src/fencing/sqlite.js';
import { RealHarness } from '../../src/fault/harness.js';
import { runsPerArm, FAULT_TIMEOUT_MS } from '../support/fault-env.js';
import { elapse } from '../support/time.js';
import { tempDir } from '../support/tmp.js';

// F26: the resource process is killed (SIGKILL) in the middle of a fenced write. After the
// restart the mark must be ≥ every token the resource acknowledged, and never behind the data:
// otherwise a stale writer with a token between them would be accepted.

interface Round {
  acked: bigint[];
  hwm: bigint;
  dataToken: bigint | undefined;
  integrity: string;
  staleAccepted: boolean;
}

async function crashRound(variant: 'atomic' | 'split_mark', round: number): Promise<Round> {
  const tmp = tempDir('f26');
  const resourcePath = `${tmp.dir}/resource.db`;
  const h = new RealHarness({ storeUrl: `sqlite:${tmp.dir}/leases.db`, resourcePath });
  try {
    const w = await h.spawn(`r${round}`);
    const acked: bigint[] = [];
    let token = 10n;
    for (; token < 13n; token++) {
      const r = await h.write(w, {
        scope: 'job',
        value: `v${token}`,
        fenced: true,
        check: false,
        token: String(token),
        explicitToken: true,
        variant,
        slowCommitMs: 20,
      });
      if (r.status === 'applied') acked.push(token);
    }
    if (variant === 'split_mark') {
      // The control: the next write commits its data and stops itself before the mark is
      // persisted; SIGKILL lands in exactly that gap.
      const committed = w.next('data_committed');
      const pending = h
        .write(w, {
          scope: 'job',
          value: `v${token}`,
          fenced: true,
          check: false,
          token: String(token),
          explicitToken: true,
          variant,
          stopAfterData: true,
        })
        .catch(() => undefined);
      await committed;
      w.signal('SIGKILL');
      await w.waitExit();
      void pending;
    } else {
      // The next write spins inside its one transaction; SIGKILL lands in the middle of it or
      // after its commit — safe either way, which is what the atomic fence must show.
      const writing = w.next('writing');
      const pending = h
        .write(w, {
          scope: 'job',
          value: `v${token}`,
          fenced: true,
          check: false,
          token: String(token),
          explicitToken: true,
          variant,
          slowCommitMs: 400,
        })
        .catch(() => undefined);
      await writing;
      await elapse(50 + Math.floor(Math.random() * 200));
      w.signal('SIGKILL');
      await w.waitExit();
      void pending;
    }
    await h.finish();
    // "Restart": open the resource again, as its process would after the crash.
    const db = new Database(resourcePath);
    const integrity = String(db.pragma('integrity_check', { simple: true }));
    const fence = new SqliteFence({ database: db });
    const hwm = fence.highWaterMark('job');
    const row = db.prepare("SELECT token FROM job WHERE scope = 'job'").get() as
      { token: string } | undefined;
    const dataToken = row === undefined ? undefined : BigInt(row.token);
    // A stale writer whose token sits just below the data's: must be rejected.
    let staleAccepted = false;
    if (dataToken !== undefined) {
      const r = fence.apply('job', dataToken - 1n, (d) =>
        d
          .prepare("UPDATE job SET body = 'stale', token = ? WHERE scope = 'job'")
          .run(String(dataToken - 1n)),
      );
      staleAccepted = r.status === 'applied';
    }
    db.close();
    return { acked, hwm, dataToken, integrity, staleAccepted };
  } finally {
    await Promise.all(h.workers.map((x) => x.kill()));
    tmp.remove();
  }
}

describe('F26 resource killed between write and mark, real processes (sqlite resource)', () => {
  it(
    'atomic fence: after restart the mark covers every acknowledged token and the data; the split-mark control lets a stale write in',
    { timeout: FAULT_TIMEOUT_MS },
    async () => {
      const rounds = runsPerArm(3, 20);
      let controlAnomalies = 0;
      let staleAcceptedFenced = 0;
      for (let i = 0; i < rounds; i++) {
        const a = await crashRound('atomic', i);
        assert.equal(a.integrity, 'ok');
        for (const t of a.acked)
          assert.ok(a.hwm >= t, `mark ${a.hwm} below acknowledged token ${t}`);
        assert.equal(a.dataToken, a.hwm, 'data and mark must move together');
        if (a.staleAccepted) staleAcceptedFenced++;
        const c = await crashRound('split_mark', i);
        assert.equal(c.integrity, 'ok');
        if (c.staleAccepted) controlAnomalies++;
      }
      console.log(
        `real F26 sqlite-resource atomic: runs=${rounds} stale_writes_accepted=${staleAcceptedFenced}; split-mark control: stale_writes_accepted in ${controlAnomalies}/${rounds} runs`,
      );
      assert.equal(staleAcceptedFenced, 0);
      // The kill is sequenced into the control's gap by a signal: every run must show it.
      assert.equal(
        controlAnomalies,
        rounds,
        `control showed the anomaly in ${controlAnomalies}/${rounds}`,
      );
    },
  );
});
