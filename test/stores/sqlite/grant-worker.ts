// A child process for sqlite-restore.test.ts: grants and releases `n` leases on one SQLite
// file, then prints {"grants": N, "refused": N} and exits. Argument: JSON
// {path, prefix, n, groupCommit}.
import { LeaseClient } from '../../../src/core/client.js';
import { SqliteLeaseStore } from '../../../src/stores/sqlite/store.js';

const cfg = JSON.parse(process.argv[2] ?? '{}') as {
  path: string;
  prefix: string;
  n: number;
  groupCommit: boolean;
};
const store = new SqliteLeaseStore({ path: cfg.path, groupCommit: cfg.groupCommit });
const client = new LeaseClient({ store, ownerId: cfg.prefix });
let grants = 0;
let refused = 0;
const causes: string[] = [];
for (let i = 0; i < cfg.n; i++) {
  const r = await client.acquire(`${cfg.prefix}/${i % 4}`, { ttl: 5000 });
  if (r.status === 'acquired') {
    grants++;
    await r.lease.release();
  } else if (r.status === 'unavailable') {
    refused++;
    causes.push(String((r.cause as Error).message));
  }
}
await client.close();
await store.close();
process.stdout.write(`${JSON.stringify({ grants, refused, causes: causes.slice(0, 3) })}\n`);
