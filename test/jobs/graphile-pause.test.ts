import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { jobGone, startGraphileEnv, type GraphileEnv } from './graphile-env.js';
import { resultRow } from './pg-boss-env.js';
import { pauseArms, type PauseQueue } from './pause-story.js';

// pause-story.ts on graphile-worker. graphile-worker takes a job back from a silent worker only
// after 4 hours, or when an operator declares the worker dead with forceUnlockWorkers (its
// documented recovery): the test does the latter while A is stopped. Control arm: the task
// alone, which graphile-worker completes after it returns.

const TASK = 'jobs_gw_task';

describe('graphile-worker: a paused worker declared dead, real processes', () => {
  let env: GraphileEnv;
  before(async () => {
    env = await startGraphileEnv('jobs_gwp');
  });
  after(async () => {
    await env?.close();
  });

  it(
    "fenced: A's late write and completion are refused and B's result stands; control: A's write lands",
    { timeout: 30 * 60_000 },
    async () => {
      const q: PauseQueue = {
        keepsOutput: false,
        worker: new URL('./graphile-worker-process.js', import.meta.url),
        config: { url: env.url, workerSchema: env.workerSchema, schema: env.schema, task: TASK },
        send: async (run) => (await env.utils.addJob(TASK, { run }, { maxAttempts: 5 })).id,
        read: async (id) => ({
          value: (await resultRow(env.schema, id))?.value,
          finished: await jobGone(env.workerSchema, id),
          output: undefined,
        }),
        takeBack: async (aStarted) => {
          assert.equal(typeof aStarted['lockedBy'], 'string');
          await env.utils.forceUnlockWorkers([aStarted['lockedBy'] as string]);
        },
      };
      await pauseArms(q, 'graphile-worker');
    },
  );
});
