// One contender process for the multi-process SQLite test: acquires the key `rounds` times,
// recording when it got the lease and when it began to release it, on the machine's
// monotonic clock (CLOCK_MONOTONIC, the same reading in every process). While it holds the
// lease it runs a real critical section: a read-modify-write of a shared counter file with a
// timer wait between the read and the write, so two holders at once lose an increment.
import { appendFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { LeaseClient } from '../../src/core/client.js';
import { SqliteLeaseStore } from '../../src/stores/sqlite/store.js';

const [path, key, roundsText, out, counter] = process.argv.slice(2);
if (!path || !key || !roundsText || !out || !counter) {
  throw new Error('usage: worker DB KEY ROUNDS OUT COUNTER');
}
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
  const seen = Number(await readFile(counter, 'utf8'));
  await sleep(1 + (i % 3)); // 1–3 ms: another holder at this point would read the same count
  await writeFile(counter, String(seen + 1));
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
