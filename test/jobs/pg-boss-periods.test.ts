import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import { PgBoss } from 'pg-boss';
import type { AttemptResult } from '../../src/jobs/attempt-result.js';
import { PgBossFencedWorker, pgBossCreatedPeriod } from '../../src/jobs/pg-boss.js';
import { dropSchema, PG_URL, uniqueSchema, withPgClient } from '../support/postgres.js';
import { leaseParts } from './pg-boss-env.js';

// One fenced run per minute on pg-boss schedules. Two pg-boss installs (two schemas on one
// database: a blue/green deploy, a copy restored beside the original) each run
// `schedule('tick', '* * * * *')`. pg-boss's own guard (a singleton slot per occurrence) is per
// schema, so each install sends the occurrence: its first cron pass, seconds after start, sends
// the current minute's. pg-boss forwards an occurrence as a plain job, so the fenced workers read
// the period from the job's creation time (`pgBossCreatedPeriod`). Control arm: plain workers on
// two installs. Both arms start together, inside one minute.

const QUEUE = 'tick';
const SCHEDULE = 'tick';

describe('pg-boss schedules: one fenced run per minute', () => {
  const schema = uniqueSchema('cron_pbp');
  const bosses: { boss: PgBoss; schema: string }[] = [];
  after(async () => {
    for (const b of bosses) await b.boss.stop({ graceful: false }).catch(() => undefined);
    for (const b of bosses) await dropSchema(b.schema);
    await dropSchema(schema);
  });

  async function install(label: string): Promise<PgBoss> {
    const bossSchema = uniqueSchema(`cron_pb${label}`);
    const boss = new PgBoss({
      connectionString: PG_URL,
      schema: bossSchema,
      // The cron pass every second, so the first one runs right after start.
      cronMonitorIntervalSeconds: 1,
      cronWorkerIntervalSeconds: 1,
      max: 3,
    });
    boss.on('error', () => undefined);
    bosses.push({ boss, schema: bossSchema });
    await boss.start();
    await boss.createQueue(QUEUE, { retryLimit: 3, retryDelay: 0 });
    await boss.schedule(QUEUE, '* * * * *');
    return boss;
  }

  async function until(what: string, ms: number, done: () => boolean): Promise<void> {
    const end = Date.now() + ms;
    while (!done()) {
      if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
      await delay(50);
    }
  }

  it('control arm: both installs run the minute; fenced: one effect, the duplicate finds the minute done', async () => {
    await withPgClient((c) =>
      c.query(
        `CREATE SCHEMA "${schema}";
         CREATE TABLE "${schema}".period_effect (arm text NOT NULL, start bigint NOT NULL, by text NOT NULL)`,
      ),
    );
    // Both arms' occurrences must fall in one minute: start early enough in it.
    const second = new Date().getUTCSeconds();
    if (second > 40) await delay((61 - second) * 1000);
    const minute = Math.floor(Date.now() / 60_000) * 60_000;
    const [ca, cb, fa, fb] = await Promise.all(['ca', 'cb', 'fa', 'fb'].map(install));

    // Control arm: pg-boss alone.
    const runs: number[] = [];
    for (const boss of [ca!, cb!]) {
      await boss.work(QUEUE, { pollingIntervalSeconds: 0.5 }, async ([job]) => {
        runs.push(Date.now());
        await withPgClient((c) =>
          c.query(`INSERT INTO "${schema}".period_effect VALUES ('control', $1, $2)`, [
            minute,
            job!.id,
          ]),
        );
      });
    }

    // Fenced arm: one lease store and fence for both installs' workers.
    const parts = leaseParts(PG_URL, schema);
    const results: { by: string; result: AttemptResult }[] = [];
    const effects: string[] = [];
    const workers = [fa!, fb!].map(
      (boss, i) =>
        new PgBossFencedWorker({
          boss,
          queue: QUEUE,
          client: parts.client,
          fence: parts.fence,
          pollInterval: '100ms',
          periodOf: pgBossCreatedPeriod(SCHEDULE),
          handler: async ({ token, scope }) => {
            const w = await parts.fence.write({ scope, token }, (tx) =>
              tx.query(`INSERT INTO "${schema}".period_effect VALUES ('fenced', $1, $2)`, [
                minute,
                `install${i}`,
              ]),
            );
            if (w.status !== 'applied') throw new Error(`effect refused: ${w.status}`);
            effects.push(`install${i}`);
            await delay(200); // the other install's job of the minute arrives meanwhile
          },
          onOutcome: ({ result }) => results.push({ by: `install${i}`, result }),
        }),
    );
    try {
      for (const w of workers) w.start();
      await until('both installs ran the control job', 20_000, () => runs.length >= 2);
      await until('both fenced jobs settled', 20_000, () => results.length >= 2);
      const statuses = results.map((r) => r.result.status).sort();
      console.log(
        `# pg-boss control: 1 minute, ${runs.length} runs; fenced: ${effects.length} effect, ${statuses.join(', ')}`,
      );
      assert.equal(runs.length, 2);
      assert.deepEqual(statuses, ['completed', 'period_done']);
      assert.equal(effects.length, 1);
      const done = results.find((r) => r.result.status === 'period_done')!.result;
      if (done.status === 'period_done') assert.equal(done.latestPeriod, BigInt(minute));
      const rows = await withPgClient((c) =>
        c.query(`SELECT by FROM "${schema}".period_effect WHERE arm = 'fenced'`),
      );
      assert.equal(rows.rows.length, 1);
    } finally {
      for (const w of workers) await w.stop();
      await parts.close();
    }
  });
});
