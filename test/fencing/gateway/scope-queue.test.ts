import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ScopeQueue } from '../../../src/fencing/scope-queue.js';
import { Gate } from '../../support/gate.js';

describe('ScopeQueue', () => {
  it('runs one task of a scope at a time, in arrival order; other scopes run alongside', async () => {
    const q = new ScopeQueue(8);
    const log: string[] = [];
    const gate = new Gate();
    const first = q.run('a', async () => {
      log.push('a1 start');
      await gate.wait();
      log.push('a1 end');
      return 1;
    });
    const second = q.run('a', () => {
      log.push('a2');
      return Promise.resolve(2);
    });
    const other = q.run('b', () => {
      log.push('b1');
      return Promise.resolve(3);
    });
    assert.equal(await other, 3);
    await gate.reached;
    assert.deepEqual(log, ['a1 start', 'b1'], 'a2 waits while a1 runs; b1 does not');
    assert.equal(q.size('a'), 2);
    assert.equal(q.total, 2);
    gate.open();
    assert.equal(await first, 1);
    assert.equal(await second, 2);
    assert.deepEqual(log, ['a1 start', 'b1', 'a1 end', 'a2']);
    await Promise.resolve();
    assert.equal(q.size('a'), 0);
    assert.equal(q.total, 0);
  });

  it('refuses beyond maxWaiting without running the task', async () => {
    const q = new ScopeQueue(1);
    const gate = new Gate();
    const running = q.run('a', () => gate.wait());
    const waiting = q.run('a', () => Promise.resolve('second'));
    let ran = false;
    const refused = q.run('a', () => {
      ran = true;
      return Promise.resolve('third');
    });
    assert.equal(refused, undefined);
    assert.equal(ran, false);
    gate.open();
    await running;
    assert.equal(await waiting, 'second');
  });

  it('a task that fails, even synchronously, frees the scope for the next', async () => {
    const q = new ScopeQueue(4);
    const sync = q.run('a', () => {
      throw new Error('sync');
    });
    const async_ = q.run('a', () => Promise.reject(new Error('async')));
    const next = q.run('a', () => Promise.resolve('ran'));
    await assert.rejects(sync!, /sync/);
    await assert.rejects(async_!, /async/);
    assert.equal(await next, 'ran');
  });
});
