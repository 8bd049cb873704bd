import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { WalSync, type SyncFile } from '../../../src/stores/sqlite/batch-wal-sync.js';

/** A sync whose calls are held until the test finishes them, one by one. */
function heldSync(): { sync: SyncFile; calls: Array<(err: Error | null) => void> } {
  const calls: Array<(err: Error | null) => void> = [];
  return { sync: (_fd, done) => calls.push(done), calls };
}

/** Whether `p` has settled after the microtasks queued so far have run. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return done;
}

describe('WalSync (the grants durability barrier)', () => {
  it('resolves only after a sync that started after the call has finished', async () => {
    const { sync, calls } = heldSync();
    const wal = new WalSync(-1, sync);
    const first = wal.durable();
    assert.equal(calls.length, 1, 'the first call starts a sync');
    const second = wal.durable(); // committed after the running sync started
    assert.equal(calls.length, 1, 'one sync at a time');
    calls[0]!(null);
    assert.equal(await settled(first), true);
    assert.equal(await settled(second), false, 'the sync that ran may not cover it');
    assert.equal(calls.length, 2, 'the next sync starts when the running one ends');
    calls[1]!(null);
    assert.equal(await settled(second), true);
  });

  it('lets every caller that arrives during one sync share the next one', async () => {
    const { sync, calls } = heldSync();
    const wal = new WalSync(-1, sync);
    const first = wal.durable();
    const waiting = Array.from({ length: 50 }, () => wal.durable());
    calls[0]!(null);
    await first;
    assert.equal(calls.length, 2);
    calls[1]!(null);
    await Promise.all(waiting);
    assert.equal(calls.length, 2, '51 callers, 2 syncs');
    assert.equal(wal.busy, false);
  });

  it('rejects the waiters of a failed sync, and every later call: the barrier is poisoned', async () => {
    const { sync, calls } = heldSync();
    const wal = new WalSync(-1, sync);
    const first = wal.durable();
    const second = wal.durable();
    calls[0]!(Object.assign(new Error('EIO: i/o error'), { code: 'EIO' }));
    await assert.rejects(first, /fdatasync of the SQLite WAL failed/);
    await assert.rejects(second, /fdatasync of the SQLite WAL failed/);
    await assert.rejects(wal.durable(), /fdatasync of the SQLite WAL failed/);
    assert.equal(calls.length, 1, 'no sync after a failure');
  });

  it('idle() waits for the running sync and the one queued behind it', async () => {
    const { sync, calls } = heldSync();
    const wal = new WalSync(-1, sync);
    void wal.durable();
    void wal.durable();
    const idle = wal.idle();
    calls[0]!(null);
    assert.equal(await settled(idle), false);
    calls[1]!(null);
    assert.equal(await settled(idle), true);
  });
});
