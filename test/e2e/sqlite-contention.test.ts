import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../support/tmp.js';

const WORKER = fileURLToPath(new URL('./sqlite-contention-worker.js', import.meta.url));

interface Grant {
  pid: number;
  token: bigint;
  acquiredNs: bigint;
  releasingNs: bigint;
}

function runWorker(args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WORKER, ...args], {
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    child.on('error', reject);
    child.on('exit', (code) => resolve(code ?? -1));
  });
}

describe('SQLite across processes', () => {
  it(
    '4 processes × 200 acquisitions on one key, each holding it through a 1–3 ms read-modify-write: tokens strictly increase, holders never overlap, no increment is lost',
    { timeout: 240_000 },
    async () => {
      const tmp = tempDir('sqlite-4proc');
      try {
        const db = join(tmp.dir, 'leases.db');
        const out = join(tmp.dir, 'history.jsonl');
        const counter = join(tmp.dir, 'counter');
        writeFileSync(counter, '0');
        const codes = await Promise.all(
          Array.from({ length: 4 }, () => runWorker([db, 'jobs/nightly', '200', out, counter])),
        );
        assert.deepEqual(codes, [0, 0, 0, 0]);
        const raw = readFileSync(out, 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as Record<string, string | number>);
        assert.equal(raw.filter((r) => 'error' in r).length, 0, 'every acquisition succeeded');
        const retries = raw
          .filter((r) => 'unavailable' in r)
          .reduce((n, r) => n + Number(r['unavailable']), 0);
        console.log(`# 4 processes × 200 grants; unavailable answers retried: ${retries}`);
        const grants: Grant[] = raw
          .filter((r) => 'token' in r)
          .map((r) => ({
            pid: Number(r['pid']),
            token: BigInt(r['token']!),
            acquiredNs: BigInt(r['acquiredNs']!),
            releasingNs: BigInt(r['releasingNs']!),
          }));
        assert.equal(grants.length, 800);
        assert.equal(new Set(grants.map((g) => g.pid)).size, 4);
        grants.sort((a, b) =>
          a.acquiredNs < b.acquiredNs ? -1 : a.acquiredNs > b.acquiredNs ? 1 : 0,
        );
        for (let i = 1; i < grants.length; i++) {
          const prev = grants[i - 1]!;
          const cur = grants[i]!;
          assert.ok(cur.token > prev.token, `grant ${i}: token ${cur.token} after ${prev.token}`);
          assert.ok(
            cur.acquiredNs > prev.releasingNs,
            `grant ${i} (pid ${cur.pid}, token ${cur.token}) began before pid ${prev.pid} released token ${prev.token}`,
          );
        }
        assert.equal(new Set(grants.map((g) => g.token)).size, 800, 'no token handed out twice');
        // Each holder's critical section read the shared count, waited 1–3 ms and wrote it
        // plus one: a second holder inside that window would have lost an increment.
        assert.equal(readFileSync(counter, 'utf8'), '800', 'no increment lost to an overlap');
      } finally {
        tmp.remove();
      }
    },
  );
});

describe('SQLite first open', () => {
  it(
    'six processes opening the same new file at once all succeed (WAL switch and migration are retried)',
    { timeout: 120_000 },
    async () => {
      const tmp = tempDir('sqlite-open-race');
      try {
        for (let round = 0; round < 3; round++) {
          const db = join(tmp.dir, `race-${round}.db`);
          const script = `import { SqliteLeaseStore } from ${JSON.stringify(new URL('../../src/stores/sqlite/store.js', import.meta.url).href)};
const s = new SqliteLeaseStore({ path: ${JSON.stringify(db)} }); await s.close();`;
          const codes = await Promise.all(
            Array.from(
              { length: 6 },
              () =>
                new Promise<number>((resolve, reject) => {
                  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
                    stdio: ['ignore', 'ignore', 'inherit'],
                  });
                  child.on('error', reject);
                  child.on('exit', (code) => resolve(code ?? -1));
                }),
            ),
          );
          assert.deepEqual(codes, [0, 0, 0, 0, 0, 0], `round ${round}`);
        }
      } finally {
        tmp.remove();
      }
    },
  );
});
