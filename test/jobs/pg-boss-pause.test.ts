import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CHAOS } from '../support/fault-env.js';
import { jobRow, resultRow, startPgBossEnv, type PgBossEnv } from './pg-boss-env.js';
import { pauseRun, pauseTally, type PauseQueue } from './pause-story.js';

// pause-story.ts on pg-boss: the queue's run-time limit is 1 s, its expiry sweep runs every
// second in the test process. Control arm: pg-boss alone, as its work() does.

const RUNS = CHAOS ? 20 : 1;

describe('pg-boss: a worker paused past the job timeout, real processes', () => {
  let env: PgBossEnv;
  before(async () => {
    env = await startPgBossEnv('jobs_pgbp', 1);
  });
  after(async () => {
    await env?.close();
  });

  it(
    "fenced: A's late write and completion are refused and B's result stands; control: A's write lands",
    { timeout: 30 * 60_000 },
    async () => {
      const q: PauseQueue = {
        keepsOutput: true,
        worker: new URL('./pg-boss-worker.js', import.meta.url),
        config: { url: env.url, bossSchema: env.bossSchema, schema: env.schema, queue: env.queue },
        send: async (run) => {
          const id = await env.boss.send(env.queue, { run });
          assert.ok(id !== null);
          return id;
        },
        read: async (id) => {
          const job = await jobRow(env, id);
          return {
            value: (await resultRow(env.schema, id))?.value,
            finished: job?.state === 'completed',
            output: job?.output,
          };
        },
      };
      const fenced = pauseTally();
      const control = pauseTally();
      for (let i = 0; i < RUNS; i++) {
        await pauseRun(q, true, fenced);
        await pauseRun(q, false, control);
      }
      process.stdout.write(
        `# pg-boss pause: fenced ${JSON.stringify(fenced)}\n# pg-boss pause: control ${JSON.stringify(control)}\n`,
      );
      assert.equal(fenced.staleWritesAccepted, 0);
      assert.equal(fenced.anomalies, 0);
      assert.ok(
        control.anomalies >= Math.ceil(0.9 * control.runs),
        `control showed the anomaly in ${control.anomalies}/${control.runs} runs`,
      );
    },
  );
});
