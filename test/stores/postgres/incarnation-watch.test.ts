import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PgResult } from '../../../src/drivers/postgres/client.js';
import {
  IncarnationWatch,
  type IncarnationChange,
} from '../../../src/stores/postgres/incarnation.js';

const answer = (incarnation: string): PgResult => ({ rows: [{ incarnation }], rowCount: 1 });

describe('IncarnationWatch (decision 042)', () => {
  it('gives no reason before any change, and none for a standby still in recovery', () => {
    const w = new IncarnationWatch(undefined);
    w.observe(answer('0 none'));
    w.observe(answer('recovery'));
    assert.equal(w.lossReason(5n), undefined);
  });

  it('names failover for tokens at or below the floor, nothing above it', () => {
    const w = new IncarnationWatch(undefined);
    w.observe(answer('1000 failover'));
    assert.equal(w.lossReason(999n), 'failover');
    assert.equal(w.lossReason(1000n), 'failover');
    assert.equal(w.lossReason(1001n), undefined, 'granted after the change');
  });

  it('reports a change only when its own check raised the floor, and keeps the highest floor', () => {
    const seen: IncarnationChange[] = [];
    const w = new IncarnationWatch((c) => seen.push(c));
    w.observe(answer('! 2000 restore'));
    w.observe(answer('2000 restore')); // another connection, raised already
    w.observe(answer('1000 failover')); // an older connection's memory: lower, ignored
    assert.deepEqual(seen, [{ reason: 'restore', floor: 2000n }]);
    assert.equal(w.lossReason(1500n), 'restore');
  });
});
