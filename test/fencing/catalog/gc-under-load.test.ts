import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { isLeaseholdError } from '../../../src/core/errors.js';
import { Catalog } from '../../../src/fencing/catalog/catalog.js';
import { DirectoryObjectStore } from '../../../src/fencing/catalog/objects/directory.js';
import { SeededRandom } from '../../../src/sim/random.js';
import { CHAOS } from '../../support/fault-env.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { tempDir } from '../../support/tmp.js';
import { openPointers, type PointerConfig } from './pointers.js';
import { testLease } from './suite.js';

// GC safety under load: publishers (new tokens now and then, like successive lease holders),
// readers and a collection loop run concurrently on one name and on many names, with a
// short retention so the collector deletes a lot. Delays come from a seeded schedule.
// Checked: a visible object is never deleted; a reader that read a pointer and fetched within
// the retention always finds the bytes; at the end, everything unreferenced for longer than
// the retention is gone and only the visible objects remain.

const RUN_MS = CHAOS ? 30_000 : 2_000;
const RETENTION_MS = 150;
const PUBLISHERS = 4;
const READERS = 2;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function load(kind: 'sqlite' | 'postgres', names: number, seed: number): Promise<void> {
  const tmp = tempDir('catalog-gc-load');
  const pointers: PointerConfig =
    kind === 'sqlite'
      ? { kind, path: join(tmp.dir, 'catalog.db') }
      : { kind, url: PG_URL, schema: uniqueSchema('catgc') };
  const objects = new DirectoryObjectStore({ root: join(tmp.dir, 'objects') });
  // Writers and the collector use separate catalogs (separate connections), as separate processes would.
  const writers = new Catalog({ pointers: openPointers(pointers), objects });
  const collector = new Catalog({ pointers: openPointers(pointers), objects });
  const rnd = new SeededRandom(seed);
  const nameOf = (i: number): string => `reports/load-${i}`;
  let nextToken = 1n;
  const tally = {
    slowStages: 0,
    staged: 0,
    applied: 0,
    stale: 0,
    notStaged: 0,
    reads: 0,
    slowReads: 0,
    gcRuns: 0,
    deleted: 0,
  };
  const violations: string[] = [];
  const deadline = Date.now() + RUN_MS;
  // The run lasts RUN_MS and, on a loaded machine, longer until it has done the work the end
  // checks (publishes applied, objects deleted, reads), up to a generous cap.
  const cap = Date.now() + RUN_MS * 15;
  const enough = (): boolean => tally.applied > 10 && tally.deleted > 5 && tally.reads > 10;
  const running = (): boolean => Date.now() < deadline || (!enough() && Date.now() < cap);
  try {
    const publisher = async (p: number): Promise<void> => {
      const r = rnd.fork(`publisher-${p}`);
      let lease = testLease('report/load', nextToken++);
      while (running()) {
        if (r.chance(0.3)) lease = testLease('report/load', nextToken++); // a new holder
        const name = nameOf(r.int(0, names - 1));
        const t0 = performance.now();
        let s;
        try {
          s = await writers.stage(lease, name, `${name} by ${lease.token} #${tally.staged++}`);
        } catch (err) {
          // Allowed only when the stage itself took longer than the retention (a loaded machine).
          const took = performance.now() - t0;
          if (!isLeaseholdError(err, 'ERR_UNAVAILABLE') || took < RETENTION_MS - 5) throw err;
          tally.slowStages++;
          continue;
        }
        // Now and then a publish comes later than the retention: it races the collector's
        // tombstone (and must then be refused as not_staged, never point at deleted bytes).
        await sleep(r.chance(0.1) ? r.int(RETENTION_MS - 50, RETENTION_MS + 100) : r.int(0, 20));
        const res = await writers.publish(lease, name, s.handle);
        if (res.status === 'applied') tally.applied++;
        else if (res.status === 'stale_fence') tally.stale++;
        else if (res.status === 'not_staged') tally.notStaged++;
        else assert.fail(`unexpected ${res.status}`);
      }
    };
    const reader = async (q: number): Promise<void> => {
      const r = rnd.fork(`reader-${q}`);
      while (running()) {
        const name = nameOf(r.int(0, names - 1));
        const entry = await writers.head(name);
        const readAt = performance.now();
        if (entry !== undefined) {
          const body = await objects.get(entry.handle);
          const took = performance.now() - readAt;
          tally.reads++;
          if (body === undefined) {
            // Missing bytes are only allowed once the reader held the pointer past the retention.
            if (took < RETENTION_MS)
              violations.push(
                `${entry.handle} missing ${Math.round(took)}ms after its pointer was read`,
              );
            else tally.slowReads++;
          }
        }
        await sleep(r.int(0, 5));
      }
    };
    const gcLoop = async (): Promise<void> => {
      const r = rnd.fork('gc');
      while (running()) {
        const report = await collector.gc({ retention: RETENTION_MS });
        tally.gcRuns++;
        tally.deleted += report.deleted.length + report.orphans.length;
        // Never a visible object: every deleted handle is not what its name shows now.
        for (const h of report.deleted) {
          const name = h.slice(0, h.lastIndexOf('@'));
          if ((await writers.head(name))?.handle === h)
            violations.push(`gc deleted the visible ${h}`);
        }
        await sleep(r.int(0, 30));
      }
    };
    await Promise.all([
      ...Array.from({ length: PUBLISHERS }, (_, p) => publisher(p)),
      ...Array.from({ length: READERS }, (_, q) => reader(q)),
      gcLoop(),
    ]);
    assert.deepEqual(violations, [], JSON.stringify(tally));
    // Every visible object is readable, bytes and checksum.
    const visible = new Set<string>();
    for (let i = 0; i < names; i++) {
      const got = await writers.read(nameOf(i));
      if (got.status === 'found') visible.add(got.entry.handle);
    }
    // After the retention, one more collection leaves exactly the visible objects.
    await sleep(RETENTION_MS + 20);
    await collector.gc({ retention: RETENTION_MS, limit: 100_000 });
    const left = new Set<string>();
    for await (const o of objects.list()) left.add(o.key);
    assert.deepEqual([...left].sort(), [...visible].sort(), JSON.stringify(tally));
    console.log(
      `catalog gc under load (${kind}, ${names} names, ${RUN_MS} ms): ${JSON.stringify(tally)}`,
    );
    // The run was a real one: publishes landed, the collector deleted, readers read.
    assert.ok(enough(), JSON.stringify(tally));
  } finally {
    await writers.close();
    await collector.close();
    if (pointers.kind === 'postgres') await dropSchema(pointers.schema);
    tmp.remove();
  }
}

describe('catalog gc under concurrent publishers, readers and a collection loop', () => {
  for (const kind of ['sqlite', 'postgres'] as const) {
    it(`${kind} pointers, one name`, { timeout: 180_000 }, () => load(kind, 1, 17));
    it(`${kind} pointers, many names`, { timeout: 180_000 }, () => load(kind, 12, 18));
  }
});
