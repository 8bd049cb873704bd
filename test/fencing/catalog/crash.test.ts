import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Catalog } from '../../../src/fencing/catalog/catalog.js';
import { DirectoryObjectStore } from '../../../src/fencing/catalog/objects/directory.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { tempDir } from '../../support/tmp.js';
import {
  holdPublishes,
  markOf,
  openPointers,
  publishesDone,
  type PointerConfig,
  type PublishHold,
} from './pointers.js';
import { testLease } from './suite.js';
import { Writer } from './writer.js';

// The article's recovery test: crash between writing immutable output and the fenced
// publication (and during it), then verify that nothing is half-visible and that collection
// cleans the staging. The crash is a real SIGKILL of a writer process at an exact point
// (it stops itself there with SIGSTOP first).

const NAME = 'reports/july';
const KEY = 'report/july';

type Point = 'after-stage' | 'mid-stage' | 'mid-publish';

async function crash(kind: 'sqlite' | 'postgres', point: Point): Promise<void> {
  const tmp = tempDir('catalog-crash');
  const pointers: PointerConfig =
    kind === 'sqlite'
      ? { kind, path: join(tmp.dir, 'catalog.db') }
      : { kind, url: PG_URL, schema: uniqueSchema('catcrash') };
  const root = join(tmp.dir, 'objects');
  const a = new Writer('A', {
    leasePath: join(tmp.dir, 'leases.db'),
    pointers,
    root,
    plainPath: join(tmp.dir, 'plain.db'),
  });
  const objects = new DirectoryObjectStore({ root });
  let catalog: Catalog | undefined;
  let hold: PublishHold | undefined;
  try {
    const ga = await a.request({ cmd: 'acquire', key: KEY, ttlMs: 30_000, waitMs: 0 });
    assert.equal(ga.status, 'acquired');
    const aToken = BigInt(String(ga.token));
    let aHandle: string | undefined;
    if (point === 'mid-stage') {
      // Stopped after the registry row, before the first byte: then killed.
      void a
        .request({ cmd: 'stage', name: NAME, body: "A's report", stopAfterRegister: true })
        .catch(() => undefined);
      await a.waitStopped();
    } else {
      const sa = await a.request({ cmd: 'stage', name: NAME, body: "A's report" });
      aHandle = String(sa.handle);
      if (point === 'mid-publish' && pointers.kind === 'sqlite') {
        void a
          .request({ cmd: 'publish', name: NAME, handle: aHandle, stopInTransaction: true })
          .catch(() => undefined);
        await a.waitStopped();
      }
      if (point === 'mid-publish' && pointers.kind === 'postgres') {
        // The publish is one message: the writer is killed while the server holds its
        // transaction open (pointer moved, uncommitted), then the server goes on alone.
        hold = await holdPublishes(pointers);
        void a.request({ cmd: 'publish', name: NAME, handle: aHandle }).catch(() => undefined);
        await hold.blocked();
      }
    }
    await a.kill();
    if (hold !== undefined && pointers.kind === 'postgres') {
      await hold.release();
      hold = undefined;
      await publishesDone(pointers);
    }

    catalog = new Catalog({ pointers: openPointers(pointers), objects });
    // Nothing half-visible: the pointer, the history and the mark moved together or not at all.
    const seen = await catalog.read(NAME);
    const committed = seen.status === 'found';
    if (committed) {
      assert.equal(seen.entry.handle, aHandle);
      assert.equal((await catalog.history(NAME)).length, 1);
      assert.equal(await markOf(pointers, NAME), aToken);
    } else {
      assert.deepEqual(await catalog.history(NAME), []);
      // A crashed transaction advanced no mark.
      assert.equal(await markOf(pointers, NAME), 0n);
    }
    // Only a PostgreSQL publish the server received whole can have committed.
    if (pointers.kind === 'sqlite' || point !== 'mid-publish') assert.equal(committed, false);
    const again = testLease(KEY, aToken);
    const s = await catalog.stage(again, NAME, 'after the crash');
    assert.equal((await catalog.publish(again, NAME, s.handle)).status, 'applied');
    assert.equal((await catalog.history(NAME)).length, committed ? 2 : 1);
    assert.equal(await markOf(pointers, NAME), aToken);
    // The staged object of the dead writer is collected later; the visible one stays.
    await new Promise((r) => setTimeout(r, 5)); // the store clock passes the last registry time
    const gc = await catalog.gc({ retention: 0 });
    const mine = gc.deleted.filter((h) => h.startsWith(`${NAME}@${aToken}-`) && h !== s.handle);
    assert.equal(mine.length, 1, JSON.stringify(gc));
    if (aHandle !== undefined) assert.deepEqual(mine, [aHandle]);
    assert.ok(!gc.deleted.includes(s.handle));
    const left: string[] = [];
    for await (const o of objects.list()) left.push(o.key);
    assert.deepEqual(left, [s.handle]);
    const r = await catalog.read(NAME);
    assert.equal(r.status === 'found' && r.body.toString(), 'after the crash');
  } finally {
    await hold?.release();
    await a.kill();
    await catalog?.close();
    if (pointers.kind === 'postgres') await dropSchema(pointers.schema);
    tmp.remove();
  }
}

for (const kind of ['sqlite', 'postgres'] as const) {
  describe(`catalog crash recovery, real SIGKILL (${kind} pointers)`, () => {
    it(
      'killed between stage and publish: nothing visible, the staged object is collected',
      { timeout: 120_000 },
      () => crash(kind, 'after-stage'),
    );
    it(
      'killed mid-stage (registered, no bytes yet): nothing visible, the row is collected',
      { timeout: 120_000 },
      () => crash(kind, 'mid-stage'),
    );
    it(
      kind === 'sqlite'
        ? 'killed inside the publish transaction before COMMIT: nothing visible, no mark advanced, collected later'
        : 'killed while the server holds its publish open: pointer, history and mark all or nothing, the unreferenced object collected later',
      { timeout: 120_000 },
      () => crash(kind, 'mid-publish'),
    );
  });
}
