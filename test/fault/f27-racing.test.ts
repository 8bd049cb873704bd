import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatReport } from '../../src/check/checker.js';
import { RealHarness } from '../../src/fault/harness.js';
import { runsPerArm, FAULT_TIMEOUT_MS } from '../support/fault-env.js';
import { tempDir } from '../support/tmp.js';

// F27: concurrent writers race at the resource with tokens in shuffled order. The fence's
// check and advance are one statement inside the write's transaction, so the applied tokens
// form a non-decreasing serial order; a check-then-write control lets racing writes land out
// of order. The control's race is driven, not hoped for: after the racing writes, one writer
// passes the mark's check with a lower token and is stopped there (SIGSTOP), another writes
// a higher token, then the first goes on (SIGCONT) and its write lands after the higher one.
const WORKERS = 4;
const PER_WORKER = 15;

async function race(variant: 'atomic' | 'check_then_write'): Promise<{
  staleAccepted: number;
  rejected: number;
  applied: number;
  valid: boolean;
  text: string;
}> {
  const tmp = tempDir('f27');
  const h = new RealHarness({
    storeUrl: `sqlite:${tmp.dir}/leases.db`,
    resourcePath: `${tmp.dir}/resource.db`,
  });
  try {
    const workers = await Promise.all(Array.from({ length: WORKERS }, (_, i) => h.spawn(`p${i}`)));
    const tokens = Array.from({ length: WORKERS * PER_WORKER }, (_, i) => BigInt(i + 1));
    for (let i = tokens.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [tokens[i], tokens[j]] = [tokens[j]!, tokens[i]!];
    }
    // One fenced write of `token` at the scope; the racing writes spin 3 ms inside their
    // transaction (more overlap), the driven one stops after the mark's check.
    const write = (
      w: (typeof workers)[number],
      token: bigint,
      how: { slowCommitMs: number } | { stopAfterMarkCheck: true },
    ) =>
      h.write(w, {
        scope: 'job',
        value: `${w.name}:${token}`,
        fenced: true,
        check: false,
        token: String(token),
        explicitToken: true,
        variant,
        ...how,
      });
    await Promise.all(
      workers.map(async (w, wi) => {
        for (let k = 0; k < PER_WORKER; k++) {
          await write(w, tokens[wi * PER_WORKER + k]!, { slowCommitMs: 3 });
        }
      }),
    );
    if (variant === 'check_then_write') {
      const [low, high] = [workers[0]!, workers[1]!];
      const next = BigInt(tokens.length);
      const checked = low.next('checked');
      const late = write(low, next + 1n, { stopAfterMarkCheck: true });
      await checked;
      await write(high, next + 2n, { slowCommitMs: 0 });
      low.signal('SIGCONT');
      await late;
    }
    const { report } = await h.finish();
    return {
      staleAccepted: report.figures.staleWritesAccepted,
      rejected: report.figures.staleWritesRejected,
      applied: report.figures.fencedWritesAttempted - report.figures.staleWritesRejected,
      valid: report.valid,
      text: formatReport(report),
    };
  } finally {
    await Promise.all(h.workers.map((w) => w.kill()));
    tmp.remove();
  }
}

describe('F27 racing writes at the resource, real processes (sqlite resource)', () => {
  it(
    'atomic check+write: applied tokens never go down; check-then-write: racing writes land out of order',
    { timeout: FAULT_TIMEOUT_MS },
    async () => {
      const runs = runsPerArm(2, 20);
      let fencedAccepted = 0;
      let anomalies = 0;
      let rejected = 0;
      for (let i = 0; i < runs; i++) {
        const a = await race('atomic');
        assert.equal(a.valid, true, a.text);
        fencedAccepted += a.staleAccepted;
        rejected += a.rejected;
        const c = await race('check_then_write');
        if (c.staleAccepted > 0) anomalies++;
      }
      console.log(
        `real F27 sqlite-resource atomic: runs=${runs} fenced_writes_attempted=${runs * WORKERS * PER_WORKER} stale_writes_rejected=${rejected} stale_writes_accepted=${fencedAccepted}; check-then-write control: anomaly in ${anomalies}/${runs} runs`,
      );
      assert.equal(fencedAccepted, 0);
      assert.ok(rejected > 0);
      assert.ok(
        anomalies >= 0.95 * runs,
        `control arm showed out-of-order writes in ${anomalies}/${runs} runs`,
      );
    },
  );
});
