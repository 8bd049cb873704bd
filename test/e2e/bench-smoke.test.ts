import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { tempDir } from '../support/tmp.js';

const RUN = fileURLToPath(new URL('../../bench/run.js', import.meta.url));

interface Row {
  readonly suite: string;
  readonly subject: string;
  readonly scenario: string;
  readonly workers: number;
  readonly keys: string;
  readonly cyclesPerSec?: number;
  readonly p50Ms?: number;
  readonly ratioToRaw?: number;
}

// `npm run bench` is not part of CI (speed lives there, not in tests), but it must keep
// running: a store change that breaks a comparator would otherwise surface only when someone
// next measures. This runs the short form of the embedded, Redis and PostgreSQL suites and
// checks every expected row is there with a measurement — never how fast.
describe('npm run bench -- --quick still runs', () => {
  it(
    'sqlite, memory, redis and postgres suites produce every row',
    { timeout: 240_000 },
    async () => {
      const tmp = tempDir('bench-smoke');
      try {
        const json = `${tmp.dir}/rows.json`;
        await new Promise<void>((resolve, reject) => {
          execFile(
            process.execPath,
            [
              RUN,
              '--quick',
              '--duration',
              '200',
              '--only',
              'sqlite,redis,postgres',
              '--json',
              json,
            ],
            { timeout: 220_000, maxBuffer: 16 * 1024 * 1024 },
            (err, _stdout, stderr) =>
              err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(),
          );
        });
        const rows = JSON.parse(readFileSync(json, 'utf8')) as Row[];
        const has = (
          suite: string,
          subject: string,
          scenario: string,
          keys: string,
          workers: number,
        ) =>
          rows.some(
            (r) =>
              r.suite === suite &&
              r.subject === subject &&
              r.scenario === scenario &&
              r.keys === keys &&
              r.workers === workers &&
              ((r.cyclesPerSec ?? 0) > 0 || (r.p50Ms ?? -1) >= 0),
          );
        for (const [suite, subject, scenario, keys, workers] of [
          ['sqlite', 'raw better-sqlite3 (same 2 statements, same sync policy)', 'cycle', 'hot', 1],
          ['sqlite', 'leasehold', 'cycle', 'distinct', 32],
          ['sqlite', 'leasehold, local successors 15', 'cycle', 'hot', 32],
          ['sqlite', 'leasehold', 'handoff across processes', 'hot', 2],
          ['memory', 'leasehold', 'cycle', 'hot', 32],
          ['redis', 'raw SET NX PX + DEL', 'cycle', 'distinct', 32],
          ['redis', 'leasehold', 'cycle', 'distinct', 1],
          ['redis', 'floor: two empty scripts', 'cycle', 'distinct', 1],
          ['redis', "floor: the scripts' Redis commands", 'cycle', 'distinct', 1],
          ['redis', 'leasehold, local successors 15', 'cycle', 'hot', 32],
          ['redis', 'redis-semaphore Mutex', 'cycle', 'hot', 32],
          ['redis', 'redlock 4 (1 instance)', 'handoff', 'hot', 2],
          ['postgres', 'leasehold', 'cycle', 'distinct', 32],
          ['postgres', 'pg advisory lock', 'cycle', 'hot', 32],
        ] as const) {
          assert.ok(
            has(suite, subject, scenario, keys, workers),
            `no ${suite} row "${subject}" ${scenario} ${keys} ${workers}w in ${rows.length} rows`,
          );
        }
        // One-worker Redis rows carry their per-round ratio to the raw pair of the same rounds.
        const single = rows.find(
          (r) => r.suite === 'redis' && r.subject === 'leasehold' && r.workers === 1,
        );
        assert.ok(
          typeof single?.ratioToRaw === 'number' && single.ratioToRaw > 0,
          `no per-round ratio on the one-worker Redis row: ${JSON.stringify(single)}`,
        );
      } finally {
        tmp.remove();
      }
    },
  );
});
