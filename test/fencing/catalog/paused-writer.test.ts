import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Catalog } from '../../../src/fencing/catalog/catalog.js';
import { DirectoryObjectStore } from '../../../src/fencing/catalog/objects/directory.js';
import { runsPerArm } from '../../support/fault-env.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { openPointers, type PointerConfig } from './pointers.js';
import { tempDir } from '../../support/tmp.js';
import { Writer } from './writer.js';

// The article's paused report writer, literally, with real processes and real signals:
// 1. A acquires report/july (token t_A). 2. A stages reports/july@t_A-…, checks its lease
// and is stopped (SIGSTOP) before the publish reaches the pointer. 3. A's lease expires; B
// acquires (t_B > t_A). 4. B stages its object and 5. publishes it. 6. A resumes (SIGCONT)
// and publishes. 7. The catalog refuses A (stale_fence); a later gc removes A's object.
// The control arm publishes with a plain pointer overwrite instead: A's object is visible.

const TTL_MS = 1000;
const NAME = 'reports/july';

async function story(
  fenced: boolean,
  kind: 'sqlite' | 'postgres',
): Promise<{
  aToken: bigint;
  bToken: bigint;
  aPublish: Record<string, unknown>;
  aAgain: Record<string, unknown> | undefined;
  visible: string | undefined;
  visibleBody: string | undefined;
  aHandle: string;
  bHandle: string;
  gc: { deleted: readonly string[] } | undefined;
  aBytesAfterGc: boolean;
  bBytesAfterGc: boolean;
}> {
  const tmp = tempDir('catalog-story');
  const pointers: PointerConfig =
    kind === 'sqlite'
      ? { kind, path: join(tmp.dir, 'catalog.db') }
      : { kind, url: PG_URL, schema: uniqueSchema('catstory') };
  const config = {
    leasePath: join(tmp.dir, 'leases.db'),
    pointers,
    root: join(tmp.dir, 'objects'),
    plainPath: join(tmp.dir, 'plain.db'),
  };
  const a = new Writer('A', config);
  const b = new Writer('B', config);
  try {
    const ga = await a.request({ cmd: 'acquire', key: 'report/july', ttlMs: TTL_MS, waitMs: 0 });
    assert.equal(ga.status, 'acquired');
    const sa = await a.request({ cmd: 'stage', name: NAME, body: "A's report" });
    assert.equal(sa.status, 'staged');
    const aPublishing = a.request({
      cmd: 'publish',
      name: NAME,
      handle: String(sa.handle),
      stopAfterCheck: true,
      unfenced: !fenced,
    });
    await a.waitStopped();
    // B waits for the key: it is granted only once A's lease has expired at the store.
    const gb = await b.request({
      cmd: 'acquire',
      key: 'report/july',
      ttlMs: TTL_MS * 10,
      waitMs: 20 * TTL_MS,
    });
    assert.equal(gb.status, 'acquired');
    const sb = await b.request({ cmd: 'stage', name: NAME, body: "B's report" });
    const pb = await b.request({
      cmd: 'publish',
      name: NAME,
      handle: String(sb.handle),
      unfenced: !fenced,
    });
    assert.equal(pb.status, fenced ? 'applied' : 'overwritten');
    assert.ok(a.isStopped(), 'A stayed stopped while B took over');
    a.signal('SIGCONT');
    const aPublish = await aPublishing;
    // Once resumed, A's library knows the lease is gone: a new publish is refused before any I/O.
    const aAgain = fenced
      ? await a.request({ cmd: 'publish', name: NAME, handle: String(sa.handle) })
      : undefined;

    const objects = new DirectoryObjectStore({ root: config.root });
    const catalog = new Catalog({
      pointers: openPointers(pointers),
      objects,
    });
    let visible: string | undefined;
    let visibleBody: string | undefined;
    let gc;
    try {
      if (fenced) {
        const r = await catalog.read(NAME);
        if (r.status === 'found') {
          visible = r.entry.handle;
          visibleBody = r.body.toString();
        }
        await new Promise((r) => setTimeout(r, 5)); // the store clock passes the last registry time
        gc = await catalog.gc({ retention: 0 });
      } else {
        const db = new Database(config.plainPath, { readonly: true });
        visible = (
          db.prepare('SELECT handle FROM plain_pointer WHERE name = ?').get(NAME) as {
            handle: string;
          }
        ).handle;
        db.close();
        visibleBody = (await objects.get(visible))?.toString();
      }
      return {
        aToken: BigInt(String(ga.token)),
        bToken: BigInt(String(gb.token)),
        aPublish,
        aAgain,
        visible,
        visibleBody,
        aHandle: String(sa.handle),
        bHandle: String(sb.handle),
        gc,
        aBytesAfterGc: (await objects.get(String(sa.handle))) !== undefined,
        bBytesAfterGc: (await objects.get(String(sb.handle))) !== undefined,
      };
    } finally {
      await catalog.close();
    }
  } finally {
    await Promise.all([a.kill(), b.kill()]);
    if (pointers.kind === 'postgres') await dropSchema(pointers.schema);
    tmp.remove();
  }
}

describe('the paused report writer, real processes and SIGSTOP', () => {
  it(
    'fenced: A resumes after B published and gets stale_fence; read returns B; gc removes A and keeps B',
    { timeout: 300_000 },
    async () => {
      const runs = runsPerArm(2, 20);
      for (let i = 0; i < runs; i++) {
        // SQLite pointers, and PostgreSQL pointers on every other run.
        const r = await story(true, i % 2 === 0 ? 'sqlite' : 'postgres');
        const where = `run ${i}: ${JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))}`;
        assert.ok(r.bToken > r.aToken, where);
        assert.equal(r.aPublish.status, 'stale_fence', where);
        assert.equal(r.aPublish.highWaterMark, r.bToken.toString(), where);
        assert.equal(r.aAgain?.status, 'error', where);
        assert.equal(r.aAgain?.code, 'ERR_LEASE_LOST', where);
        assert.equal(r.visible, r.bHandle, where);
        assert.equal(r.visibleBody, "B's report", where);
        assert.ok(r.gc?.deleted.includes(r.aHandle), where);
        assert.ok(!r.gc?.deleted.includes(r.bHandle), where);
        assert.equal(r.aBytesAfterGc, false, where);
        assert.equal(r.bBytesAfterGc, true, where);
      }
    },
  );

  it(
    "control arm: with a plain pointer overwrite, A's object is visible in at least 95% of runs",
    { timeout: 300_000 },
    async () => {
      const runs = runsPerArm(2, 20);
      let aVisible = 0;
      for (let i = 0; i < runs; i++) {
        const r = await story(false, 'sqlite');
        assert.equal(r.aPublish.status, 'overwritten');
        if (r.visible === r.aHandle && r.visibleBody === "A's report") aVisible++;
      }
      console.log(`catalog control arm: A's stale object visible in ${aVisible}/${runs} runs`);
      assert.ok(aVisible / runs >= 0.95, `${aVisible}/${runs}`);
    },
  );
});
