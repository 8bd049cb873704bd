import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Catalog } from '../../src/fencing/catalog/catalog.js';
import { DirectoryObjectStore } from '../../src/fencing/catalog/objects/directory.js';
import { FAULT_TIMEOUT_MS, runsPerArm } from '../support/fault-env.js';
import { dropSchema, PG_URL, uniqueSchema } from '../support/postgres.js';
import { tempDir } from '../support/tmp.js';
import { openPointers, type PointerConfig } from '../fencing/catalog/pointers.js';
import { Writer } from '../fencing/catalog/writer.js';

// Claim before start (I9) on the catalog, with real processes, as claim-before-start.test.ts
// does for the other fences: A holds token n, stages its report and checks its lease, then is
// stopped (SIGSTOP, by itself, right after the check: its publish is under way) past its TTL;
// B acquires n+1 — naming the catalog in `fences` for the report's name (the claim arm) or
// not (the control arm) — and publishes nothing; A resumes (SIGCONT) and its publish reaches
// the pointer store. The catalog's own pointer (read back through a fresh Catalog) says
// whether A's report became visible. Pointer stores: SQLite and PostgreSQL.

const TTL_MS = 1000;

describe('claim before start on the catalog: a stale writer publishes before the new owner’s first publish (real processes, SIGSTOP)', () => {
  const tmp = tempDir('claim-start-catalog');
  const schema = uniqueSchema('claims_catalog');
  const backends: Record<'sqlite' | 'postgres', PointerConfig> = {
    sqlite: { kind: 'sqlite', path: join(tmp.dir, 'catalog.db') },
    postgres: { kind: 'postgres', url: PG_URL, schema },
  };
  const readers: Catalog[] = [];
  const open = (kind: 'sqlite' | 'postgres'): Catalog => {
    const c = new Catalog({
      pointers: openPointers(backends[kind]),
      objects: new DirectoryObjectStore({ root: join(tmp.dir, 'objects') }),
    });
    readers.push(c);
    return c;
  };
  let reader: Record<'sqlite' | 'postgres', Catalog>;

  before(() => {
    reader = { sqlite: open('sqlite'), postgres: open('postgres') };
  });
  after(async () => {
    for (const c of readers) await c.close();
    await dropSchema(schema);
    tmp.remove();
  });

  it(
    'claim arm: A’s publish is refused on both pointer stores though B published nothing; control arm (no claim): A’s report is visible',
    { timeout: FAULT_TIMEOUT_MS },
    async () => {
      const runs = runsPerArm(3, 20);
      const landed = { sqlite: { claim: 0, control: 0 }, postgres: { claim: 0, control: 0 } };
      for (const kind of ['sqlite', 'postgres'] as const) {
        const config = {
          leasePath: join(tmp.dir, 'leases.db'),
          pointers: backends[kind],
          root: join(tmp.dir, 'objects'),
          plainPath: join(tmp.dir, 'plain.db'),
        };
        for (let i = 0; i < runs; i++) {
          for (const claim of [true, false]) {
            const arm = claim ? 'claim' : 'control';
            const key = `report/${kind}-${i}-${arm}`;
            const name = `reports/${kind}-${i}-${arm}`;
            const where = `${kind} run ${i} ${arm}`;
            const a = new Writer('A', config);
            const b = new Writer('B', config);
            try {
              const ga = await a.request({ cmd: 'acquire', key, ttlMs: TTL_MS, waitMs: 0 });
              assert.equal(ga.status, 'acquired', where);
              const sa = await a.request({ cmd: 'stage', name, body: "A's report" });
              assert.equal(sa.status, 'staged', where);
              const aPublish = a.request({
                cmd: 'publish',
                name,
                handle: String(sa.handle),
                stopAfterCheck: true,
              });
              await a.waitStopped();
              const gb = await b.request({
                cmd: 'acquire',
                key,
                ttlMs: TTL_MS * 10,
                waitMs: 30_000,
                ...(claim ? { claimName: name } : {}),
              });
              assert.equal(gb.status, 'acquired', `${where}: B gets the lease once A’s expired`);
              assert.ok(BigInt(String(gb.token)) > BigInt(String(ga.token)), where);
              assert.ok(a.isStopped(), `${where}: A stayed stopped while B took over`);
              // B publishes nothing: A resumes before B's first publish.
              a.signal('SIGCONT');
              const aWrote = await aPublish;
              const visible = await reader[kind].read(name);
              const aVisible =
                visible.status === 'found' &&
                visible.entry.handle === sa.handle &&
                visible.body.toString() === "A's report";
              if (aVisible) landed[kind][arm]++;
              if (claim) {
                assert.equal(aWrote.status, 'stale_fence', `${where}: ${JSON.stringify(aWrote)}`);
                assert.equal(aWrote.highWaterMark, gb.token, `${where}: refused by B's claim`);
                assert.equal(visible.status, 'not_found', `${where}: nothing is visible`);
              } else {
                assert.equal(aWrote.status, 'applied', `${where}: ${JSON.stringify(aWrote)}`);
              }
            } finally {
              await Promise.all([a.kill(), b.kill()]);
            }
          }
        }
      }
      const figures = Object.entries(landed)
        .map(([n, l]) => `catalog ${n}: with claim ${l.claim}, control ${l.control}`)
        .join('; ');
      console.log(
        `claim before start: runs per arm ${runs}; stale publishes visible before the new owner's first publish — ${figures}`,
      );
      for (const [n, l] of Object.entries(landed)) {
        assert.equal(l.claim, 0, `catalog ${n}: stale publishes visible with the claim`);
        assert.ok(
          l.control / runs >= 0.95,
          `catalog ${n}: control showed it in ${l.control}/${runs}`,
        );
      }
    },
  );
});
