import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { LeaseClient } from '../../../src/core/client.js';
import { isLeaseholdError } from '../../../src/core/errors.js';
import { SqliteFence } from '../../../src/fencing/sqlite.js';
import { epochSidecarPath } from '../../../src/stores/sqlite/epoch.js';

const WORKER = fileURLToPath(new URL('./grant-worker.js', import.meta.url));
import { SqliteLeaseStore } from '../../../src/stores/sqlite/store.js';
import { spawnCli } from '../../support/cli.js';
import { tempDir } from '../../support/tmp.js';

/** Figures of one arm, printed for docs/safety.md. */
interface Tally {
  grants: number;
  staleAttempted: number;
  staleRejected: number;
  staleAccepted: number;
  refused: number;
}
const tally = (): Tally => ({
  grants: 0,
  staleAttempted: 0,
  staleRejected: 0,
  staleAccepted: 0,
  refused: 0,
});

/**
 * A SQLite lease file copied back from an older backup. The store notices it through the
 * sidecar `<db>-epoch` (which the backup did not include) and refuses to grant; a copy whose
 * sidecar is gone too cannot be noticed, and there the fence rejects every reissued token;
 * `leasehold epoch` (the real CLI) raises the floor and grants resume above every earlier token.
 */
describe('SQLite file restored from an older copy', () => {
  const tmp = tempDir('sqlite-epoch');
  const db = join(tmp.dir, 'leases.db');
  const backup = join(tmp.dir, 'backup.db');
  const keys = ['jobs/a', 'jobs/b', 'jobs/c'];
  let fence: SqliteFence;
  /** The highest token each key granted before the restore. */
  const marks = new Map<string, bigint>();
  before(() => {
    fence = new SqliteFence({ path: join(tmp.dir, 'resource.db'), policy: '>' });
  });
  after(() => {
    fence?.close();
    tmp.remove();
  });

  /** Acquires `key`, writes through the fence, releases; counts into `t`. */
  async function grantAndWrite(
    client: LeaseClient,
    key: string,
    t: Tally,
  ): Promise<bigint | undefined> {
    const r = await client.acquire(key, { ttl: 5000 });
    if (r.status === 'unavailable') {
      t.refused++;
      return undefined;
    }
    assert.equal(r.status, 'acquired');
    t.grants++;
    const token = r.lease.token;
    const stale = token <= (marks.get(key) ?? 0n);
    if (stale) t.staleAttempted++;
    const w = fence.apply(key, token, () => undefined);
    if (stale && w.status === 'stale_fence') t.staleRejected++;
    if (stale && w.status === 'applied') t.staleAccepted++;
    await r.lease.release();
    return token;
  }

  /** Replaces the live file by the backup, as an operator restoring it would (store closed). */
  function restore(target: string): void {
    for (const suffix of ['-wal', '-shm']) rmSync(`${target}${suffix}`, { force: true });
    copyFileSync(backup, target);
  }

  it('issues tokens, is backed up, issues more, then is restored', async () => {
    const store = new SqliteLeaseStore({ path: db });
    const client = new LeaseClient({ store, ownerId: 'before' });
    const t = tally();
    try {
      for (const key of keys) await grantAndWrite(client, key, t);
      // A consistent online backup (the WAL's content included).
      const raw = new Database(db);
      raw.exec(`VACUUM INTO '${backup}'`);
      raw.close();
      for (let i = 0; i < 5; i++) {
        for (const key of keys) marks.set(key, (await grantAndWrite(client, key, t))!);
      }
    } finally {
      await client.close();
      await store.close();
    }
    assert.equal(t.grants, 18);
    assert.equal(t.staleAttempted, 0);
    for (const key of keys) assert.equal(fence.highWaterMark(key), marks.get(key));
    restore(db);
  });

  it('without a sidecar to compare with, the restored copy reissues tokens and the fence rejects every one', async () => {
    const blind = join(tmp.dir, 'blind.db');
    restore(blind); // a copy somewhere else: no sidecar travelled with it
    const store = new SqliteLeaseStore({ path: blind });
    const client = new LeaseClient({ store, ownerId: 'blind' });
    const t = tally();
    try {
      for (let i = 0; i < 5; i++) for (const key of keys) await grantAndWrite(client, key, t);
    } finally {
      await client.close();
      await store.close();
    }
    console.log(`sqlite restore, not noticed (no sidecar): ${JSON.stringify(t)}`);
    assert.equal(t.refused, 0);
    assert.equal(t.grants, 15);
    assert.equal(t.staleAttempted, 15, 'every token repeats one issued before the restore');
    assert.equal(t.staleRejected, 15);
    assert.equal(t.staleAccepted, 0);
  });

  it('with its sidecar, the restored file refuses every grant, naming the command that lifts it', async () => {
    const store = new SqliteLeaseStore({ path: db });
    const client = new LeaseClient({ store, ownerId: 'restored' });
    const t = tally();
    try {
      for (const key of [...keys, 'jobs/new']) {
        const r = await client.acquire(key, { ttl: 5000 });
        assert.equal(r.status, 'unavailable');
        assert.ok(isLeaseholdError(r.cause, 'ERR_UNAVAILABLE'));
        assert.match(String((r.cause as Error).message), /restored from an older copy/);
        assert.match(String((r.cause as Error).message), /leasehold epoch --store sqlite:/);
        t.refused++;
      }
      // With group commit (what `leasehold serve` uses) too.
      const grouped = new SqliteLeaseStore({ path: db, groupCommit: true });
      const g = new LeaseClient({ store: grouped, ownerId: 'grouped' });
      const r = await g.acquire(keys[0]!, { ttl: 5000 });
      assert.equal(r.status, 'unavailable');
      t.refused++;
      await g.close();
      await grouped.close();
    } finally {
      await client.close();
      await store.close();
    }
    console.log(`sqlite restore, noticed: ${JSON.stringify(t)}`);
    assert.equal(t.grants, 0);
    assert.equal(t.staleAccepted, 0);
  });

  it('`leasehold epoch` raises the floor: every later token exceeds every token issued before', async () => {
    const cli = spawnCli(['epoch', '--store', `sqlite:${db}`, '--json']);
    assert.equal(await cli.exited, 0, cli.stderr());
    const report = JSON.parse(cli.stdout()) as {
      floor: string;
      rowsRaised: number;
      restoreNoticed: boolean;
    };
    assert.equal(report.restoreNoticed, true);
    assert.equal(report.rowsRaised, keys.length);
    const floor = BigInt(report.floor);
    const highest = [...marks.values()].reduce((a, b) => (a > b ? a : b));
    assert.ok(floor > highest);
    const store = new SqliteLeaseStore({ path: db });
    const client = new LeaseClient({ store, ownerId: 'after' });
    const t = tally();
    try {
      for (let i = 0; i < 5; i++) {
        for (const key of [...keys, 'jobs/new']) {
          const token = await grantAndWrite(client, key, t);
          assert.ok(token !== undefined && token > floor, `${key}: ${token} > floor ${floor}`);
        }
      }
    } finally {
      await client.close();
      await store.close();
    }
    console.log(`sqlite restore + epoch: ${JSON.stringify(t)}, floor ${floor}`);
    assert.equal(t.refused, 0);
    assert.equal(t.grants, 20);
    assert.equal(t.staleAttempted, 0);
    assert.equal(t.staleAccepted, 0);
    // Running it again is harmless: the floor only grows.
    const again = spawnCli(['epoch', '--store', `sqlite:${db}`, '--json']);
    assert.equal(await again.exited, 0, again.stderr());
    assert.ok(BigInt((JSON.parse(again.stdout()) as { floor: string }).floor) > floor);
  });

  it('the sidecar never runs ahead of a file that was not restored: many grants, two stores on one file (one with group commit), no refusal', async () => {
    const fresh = join(tmp.dir, 'fresh.db');
    const a = new SqliteLeaseStore({ path: fresh });
    const b = new SqliteLeaseStore({ path: fresh, groupCommit: true });
    const ca = new LeaseClient({ store: a, ownerId: 'a' });
    const cb = new LeaseClient({ store: b, ownerId: 'b' });
    try {
      for (let i = 0; i < 50; i++) {
        const [ra, rb] = await Promise.all([
          ca.acquire(`k${i % 5}`, { ttl: 5000 }),
          cb.acquire(`j${i % 5}`, { ttl: 5000 }),
        ]);
        assert.equal(ra.status, 'acquired');
        assert.equal(rb.status, 'acquired');
        await Promise.all([ra.lease.release(), rb.lease.release()]);
      }
    } finally {
      await ca.close();
      await cb.close();
      await a.close();
      await b.close();
    }
    assert.match(readFileSync(epochSidecarPath(fresh), 'latin1'), /^\d{20} \d{20} \d{20}\n$/);
  });
  it('three processes granting on one file at once never trip the check (the sidecar is written under the write lock)', async () => {
    const shared = join(tmp.dir, 'shared.db');
    await new SqliteLeaseStore({ path: shared }).close();
    const n = 60;
    const procs: ChildProcess[] = [];
    try {
      const results = await Promise.all(
        [false, false, true].map((groupCommit, i) => {
          const p = spawn(
            process.execPath,
            [WORKER, JSON.stringify({ path: shared, prefix: `w${i}`, n, groupCommit })],
            { stdio: ['ignore', 'pipe', 'inherit'] },
          );
          procs.push(p);
          let out = '';
          p.stdout.on('data', (d: Buffer) => (out += d.toString()));
          return new Promise<{ grants: number; refused: number; causes: string[] }>(
            (resolve, reject) => {
              const timer = setTimeout(() => reject(new Error('worker timed out')), 60_000);
              p.once('exit', (code) => {
                clearTimeout(timer);
                if (code === 0) resolve(JSON.parse(out) as never);
                else reject(new Error(`worker exited ${code}: ${out}`));
              });
            },
          );
        }),
      );
      for (const r of results) assert.deepEqual([r.grants, r.refused, r.causes], [n, 0, []]);
    } finally {
      for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
    }
    const raw = new Database(shared, { readonly: true });
    const { grants } = raw.prepare('SELECT grants FROM leasehold_lease_epoch').get() as {
      grants: number;
    };
    raw.close();
    assert.equal(grants, 3 * n);
    const sidecar = Number(readFileSync(epochSidecarPath(shared), 'latin1').slice(0, 20));
    assert.ok(
      sidecar < grants && sidecar >= grants - 3,
      `sidecar ${sidecar} just behind ${grants}`,
    );
  });
});
