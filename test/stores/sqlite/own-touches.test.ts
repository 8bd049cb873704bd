import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { utimesSync, watch } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import type { StoreRequestOptions } from '../../../src/core/store.js';
import { SqliteLeaseStore } from '../../../src/stores/sqlite/store.js';
import { eventually } from '../../support/time.js';
import { tempDir } from '../../support/tmp.js';

// The sidecar `<db>-notify` wakes waiters in other processes; its file events also reach the
// process that touched it. Those must not wake this process's watchers again (they were told
// at the commit), while a touch that follows another connection's commit still must.
describe('SqliteLeaseStore: the sidecar wakes watchers for other connections’ commits only', () => {
  const opts = (): StoreRequestOptions => ({
    timeoutMs: 5000,
    signal: new AbortController().signal,
  });

  for (const groupCommit of [false, true]) {
    it(`own grants and releases do not come back through the sidecar; another connection's commit does (groupCommit ${groupCommit})`, async () => {
      const tmp = tempDir('sqlite-own-touches');
      const path = join(tmp.dir, 'leases.db');
      const store = new SqliteLeaseStore({ path, groupCommit });
      const told: Array<string | undefined> = [];
      const unwatch = await store.watch('watched', (change) => told.push(change));
      // The test's own watcher of the directory: once it has seen an event of the sidecar,
      // the store's watcher (same inotify descriptor, same loop turn) has seen it too.
      const sidecar = `${basename(path)}-notify`;
      let events = 0;
      const dir = watch(dirname(path), { persistent: false }, (_event, name) => {
        if (name === sidecar) events++;
      });
      const seenEventAfter = async (count: number): Promise<void> => {
        await eventually('an event of the sidecar', () => (events > count ? true : undefined));
        await nextTurn();
        await nextTurn();
      };
      const other = new Database(path);
      try {
        // Grants and releases of another key in this process: each touches the sidecar.
        for (let i = 0; i < 3; i++) {
          const leaseId = randomUUID();
          const r = await store.tryAcquire(
            { key: 'mine', leaseId, ownerId: 'o', ttlMs: 60_000, value: undefined },
            opts(),
          );
          assert.equal(r.status, 'acquired');
          if (r.status !== 'acquired') return;
          const released = await store.release({ key: 'mine', leaseId, token: r.token }, opts());
          assert.equal(released.status, 'released');
        }
        await seenEventAfter(0);
        assert.deepEqual(told, [], "this process's own touches woke the watcher of another key");

        // Another connection commits, then touches the sidecar as another process would.
        other.exec('CREATE TABLE IF NOT EXISTS unrelated (x INTEGER)');
        const before = events;
        const now = new Date();
        utimesSync(`${path}-notify`, now, now);
        await seenEventAfter(before);
        assert.deepEqual(told, [undefined], 'the foreign commit woke the watcher once');
      } finally {
        dir.close();
        other.close();
        unwatch();
        await store.close();
        tmp.remove();
      }
    });
  }
});
