import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { jobRow, resultRow, startPgBossEnv, type PgBossEnv } from './pg-boss-env.js';
import { pauseArms, type PauseQueue } from './pause-story.js';

// pause-story.ts on pg-boss: the queue's run-time limit is 1 s, its expiry sweep runs every
// second in the test process. Control arm: pg-boss alone, as its work() does.

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
      await pauseArms(q, 'pg-boss');
    },
  );
});
