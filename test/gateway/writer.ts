// A lease holder in its own process, for the gateway's real-process stories. It acquires
// LEASE_KEY on the SQLite lease store at LEASE_STORE (waiting up to 30 s), prints
// {"event":"acquired","token":"…"}, then for each stdin line "write BODY" PUTs BODY to
// TARGET_URL with its token in Fencing-Token — without checking its lease first: it stands
// for a worker paused between its last check and its publish (the article's report writer).
import { createInterface } from 'node:readline';
import { LeaseClient } from '../../src/index.js';
import { SqliteLeaseStore } from '../../src/stores/sqlite/index.js';

const store = new SqliteLeaseStore({ path: process.env['LEASE_STORE']! });
const client = new LeaseClient({ store });
const key = process.env['LEASE_KEY']!;
const target = process.env['TARGET_URL']!;
const ttl = Number(process.env['LEASE_TTL_MS'] ?? '1000');
const print = (m: Record<string, unknown>): void => {
  process.stdout.write(JSON.stringify(m) + '\n');
};

const r = await client.acquire(key, { ttl, wait: 30_000 });
if (r.status !== 'acquired') {
  print({ event: 'failed', status: r.status });
  process.exit(1);
}
const token = r.lease.token.toString();
print({ event: 'acquired', token });
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.startsWith('write ')) break;
  const res = await fetch(target, {
    method: 'PUT',
    headers: { 'fencing-token': token, 'content-type': 'text/plain' },
    body: line.slice('write '.length),
  });
  const text = await res.text();
  let code: string | undefined;
  try {
    code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
  } catch {
    code = undefined;
  }
  print({ event: 'wrote', status: res.status, code, mark: res.headers.get('fencing-mark') });
}
await client.close();
await store.close();
