import assert from 'node:assert/strict';
import { uniqueKey } from '../../kit/wait.js';
import { policiesOf, seeded, show, tokenOfValue, withFences } from '../helpers.js';
import type { FenceContractCase, FenceWriteOutcome } from '../harness.js';

const WRITERS = 6;
const WRITES = 60;

/** The fence contract: racing writers. */
export const concurrencyCases: FenceContractCase[] = [
  {
    name: `${WRITERS} writers racing ${WRITES} writes with interleaved tokens: the accepted sequence never goes back, every answer matches the data, the newest token is accepted (each policy)`,
    timeoutMs: 120_000,
    async run(h) {
      for (const policy of policiesOf(h)) {
        await withFences(h, policy, WRITERS, async (fences) => {
          const scope = uniqueKey('fence-race');
          const next = seeded(policy === '>=' ? 33 : 34);
          // Tokens rise over the run but arrive out of order: each write's token is its
          // position's generation give or take a few, so older and newer writes overlap.
          const writes = Array.from({ length: WRITES }, (_, i) => {
            const token = BigInt(Math.max(1, Math.floor(i / 3) + Math.floor(next() * 7) - 3));
            return { token, value: `${token}:w${i}` };
          });
          const answers: FenceWriteOutcome[] = await Promise.all(
            writes.map((w, i) => fences[i % WRITERS]!.write(scope, w.token, w.value)),
          );
          const data = await fences[0]!.accepted(scope);
          const what = `policy '${policy}'`;
          const tokens = data.map(tokenOfValue);
          for (let i = 1; i < tokens.length; i++) {
            const ok = policy === '>=' ? tokens[i]! >= tokens[i - 1]! : tokens[i]! > tokens[i - 1]!;
            assert.ok(
              ok,
              `${what}: the resource accepted ${tokens[i]} after ${tokens[i - 1]}: ${data.join(', ')}`,
            );
          }
          const appliedValues = writes
            .filter((_, i) => answers[i]!.status === 'applied')
            .map((w) => w.value);
          assert.deepEqual(
            [...data].sort(),
            [...appliedValues].sort(),
            `${what}: the data holds exactly the writes answered applied (answers: ${JSON.stringify(show(answers.map((a) => a.status)))})`,
          );
          for (const [i, a] of answers.entries()) {
            if (a.status !== 'stale_fence') continue;
            assert.ok(
              a.highWaterMark >= writes[i]!.token,
              `${what}: write ${i} at ${writes[i]!.token} was refused by the lower mark ${a.highWaterMark}`,
            );
          }
          const newest = writes.reduce((m, w) => (w.token > m ? w.token : m), 0n);
          assert.ok(tokens.includes(newest), `${what}: the newest token ${newest} was accepted`);
        });
      }
    },
  },
];
