import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { tempDir } from '../support/tmp.js';

const RUN = fileURLToPath(new URL('../../bench/run.js', import.meta.url));

// The catalog's bench suite must keep running (never how fast): every expected row is there
// with a measurement.
describe('npm run bench -- --quick --only catalog still runs', () => {
  it('produces every catalog row', { timeout: 180_000 }, async () => {
    const tmp = tempDir('bench-catalog-smoke');
    try {
      const json = `${tmp.dir}/rows.json`;
      await new Promise<void>((resolve, reject) => {
        execFile(
          process.execPath,
          [RUN, '--quick', '--duration', '200', '--only', 'catalog', '--json', json],
          { timeout: 170_000, maxBuffer: 16 * 1024 * 1024 },
          (err, _stdout, stderr) =>
            err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(),
        );
      });
      const rows = JSON.parse(readFileSync(json, 'utf8')) as {
        subject: string;
        scenario: string;
        cyclesPerSec?: number;
      }[];
      for (const [subject, scenario] of [
        ['raw fenced UPDATE (pg, the textbook statement)', 'publish pg'],
        ['PostgresFence.write + the same UPDATE', 'publish pg'],
        ['leasehold catalog.publish (pg)', 'publish pg'],
        ['raw fenced UPDATE (better-sqlite3, same sync policy)', 'publish sqlite'],
        ['leasehold catalog.publish (sqlite)', 'publish sqlite'],
        ['raw file write (wx, fsync file + directory)', 'stage 64 KiB'],
        ['leasehold catalog.stage (sqlite + directory)', 'stage 64 KiB'],
      ]) {
        assert.ok(
          rows.some(
            (r) => r.subject === subject && r.scenario === scenario && (r.cyclesPerSec ?? 0) > 0,
          ),
          `${subject} / ${scenario} missing: ${JSON.stringify(rows)}`,
        );
      }
    } finally {
      tmp.remove();
    }
  });
});
