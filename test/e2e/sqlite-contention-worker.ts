// One contender process for the multi-process SQLite test: acquires the key `rounds` times,
// recording when it got the lease and when it began to release it, on the machine's
// monotonic clock (CLOCK_MONOTONIC, the same reading in every process).
import { appendFileSync } from 'node:fs';
import { LeaseClient } from '../../src/core/client.js';
import { SqliteLeaseStore } from '../../src/stores/sqlite/store.js';

const [path, key, roundsText, out] = process.argv.slice(2);
if (!path || !key || !roundsText || !out) throw new Error('usage: worker DB KEY ROUNDS OUT');
const rounds = Number(roundsText);
const store = new SqliteLeaseStore({ path });
const client = new LeaseClient({ store, ownerId: `worker-${process.pid}` });
const lines: string[] = [];
let unavailable = 0;
for (let i = 0; i < rounds; i++) {
  const r = await client.acquire(key, { ttl: 10_000, wait: 60_000 });
  if (r.status === 'unavailable' && unavailable < 50) {
    // The write lock was not had within the busy timeout (a loaded disk): not a safety
    // question, so try again; the parent reports how often it happened.
    unavailable++;
    i--;
    continue;
  }
  if (r.status !== 'acquired') {
    lines.push(JSON.stringify({ pid: process.pid, error: r.status }));
    break;
  }
  const acquiredNs = process.hrtime.bigint();
  const releasingNs = process.hrtime.bigint();
  lines.push(
    JSON.stringify({
      pid: process.pid,
      token: r.lease.token.toString(),
      acquiredNs: acquiredNs.toString(),
      releasingNs: releasingNs.toString(),
    }),
  );
  await r.lease.release();
}
lines.push(JSON.stringify({ pid: process.pid, unavailable }));
appendFileSync(out, lines.join('\n') + '\n');
await client.close();
await store.close();
