// A lease holder in its own process, for the real-process stories of the gateway and of claim
// before start. It acquires LEASE_KEY on the SQLite lease store at LEASE_STORE (waiting up to
// 30 s), prints {"event":"acquired","token":"…"}, then for each stdin line "write BODY" writes
// BODY to its resource with its token — without checking its lease first: it stands for a
// worker paused between its last check and its publish (the article's report writer).
//
// The resource (RESOURCE, default `http`), its fenced write and the scope LEASE_KEY:
// - `http`: PUT TARGET_URL with Fencing-Token; prints {"event":"wrote",status,code,mark}.
// - `sqlite`: SqliteFence on the file RESOURCE_PATH, table report(id, body).
// - `postgres`: PostgresFence (no lease validation) on RESOURCE_URL, schema RESOURCE_SCHEMA,
//   table report(id, body).
// - `redis`: RedisFence on RESOURCE_URL with prefix RESOURCE_PREFIX, the value at
//   `<prefix>{<scope>}:report`.
// The other three print {"event":"wrote","status":"applied"|"stale_fence","mark"}.
//
// With CLAIM=1 it acquires with `fences`: the resource's fence (for `http`, the gateway at
// CLAIM_URL through GatewayClaimClient) claims the token on the scope before "acquired".
import { createInterface } from 'node:readline';
import Database from 'better-sqlite3';
import { Redis } from 'ioredis';
import { LeaseClient } from '../../../src/index.js';
import type { ClaimTarget } from '../../../src/core/fence-claim.js';
import { GatewayClaimClient } from '../../../src/fencing/http/index.js';
import { PostgresFence } from '../../../src/fencing/postgres.js';
import { RedisFence } from '../../../src/fencing/redis.js';
import { SqliteFence } from '../../../src/fencing/sqlite.js';
import { SqliteLeaseStore } from '../../../src/stores/sqlite/index.js';

const env = (name: string): string => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`writer: ${name} is not set`);
  return v;
};
const store = new SqliteLeaseStore({ path: env('LEASE_STORE') });
const client = new LeaseClient({ store });
const key = env('LEASE_KEY');
const ttl = Number(process.env['LEASE_TTL_MS'] ?? '1000');
const print = (m: Record<string, unknown>): void => {
  process.stdout.write(JSON.stringify(m) + '\n');
};

/** The resource: its fence (for the claim), its fenced write, and what to close at the end. */
interface Resource {
  readonly fence: ClaimTarget;
  write(token: bigint, body: string): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

function openResource(kind: string): Resource {
  switch (kind) {
    case 'http': {
      const target = env('TARGET_URL');
      return {
        fence: new GatewayClaimClient({ url: process.env['CLAIM_URL'] ?? target }),
        write: async (token, body) => {
          const res = await fetch(target, {
            method: 'PUT',
            headers: { 'fencing-token': token.toString(), 'content-type': 'text/plain' },
            body,
          });
          const text = await res.text();
          let code: string | undefined;
          try {
            code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
          } catch {
            code = undefined;
          }
          return { status: res.status, code, mark: res.headers.get('fencing-mark') };
        },
        close: () => Promise.resolve(),
      };
    }
    case 'sqlite': {
      const db = new Database(env('RESOURCE_PATH'), { timeout: 5000 });
      db.exec('CREATE TABLE IF NOT EXISTS report (id TEXT PRIMARY KEY, body TEXT NOT NULL)');
      const fence = new SqliteFence({ database: db });
      const upsert = db.prepare(
        'INSERT INTO report (id, body) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET body = excluded.body',
      );
      return {
        fence,
        write: (token, body) =>
          Promise.resolve(outcome(fence.apply(key, token, () => upsert.run(key, body)))),
        close: () => {
          db.close();
          return Promise.resolve();
        },
      };
    }
    case 'postgres': {
      const schema = env('RESOURCE_SCHEMA');
      const fence = new PostgresFence({ connectionString: env('RESOURCE_URL'), schema });
      return {
        fence,
        write: async (token, body) =>
          outcome(
            await fence.write({ scope: key, token }, (tx) =>
              tx.query(
                `INSERT INTO "${schema}".report (id, body) VALUES ($1, $2)
                 ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body`,
                [key, body],
              ),
            ),
          ),
        close: () => fence.close(),
      };
    }
    case 'redis': {
      const redis = new Redis(env('RESOURCE_URL'), { maxRetriesPerRequest: 1 });
      const prefix = env('RESOURCE_PREFIX');
      const fence = new RedisFence({ redis, prefix });
      return {
        fence,
        write: async (token, body) =>
          outcome(await fence.set(key, token, `${prefix}{${key}}:report`, body)),
        close: async () => void (await redis.quit()),
      };
    }
    default:
      throw new Error(`writer: RESOURCE ${kind} is not http, sqlite, postgres or redis`);
  }
}

function outcome(r: { status: string; highWaterMark?: bigint }): Record<string, unknown> {
  return { status: r.status, mark: r.highWaterMark?.toString() ?? null };
}

const resource = openResource(process.env['RESOURCE'] ?? 'http');
const r =
  process.env['CLAIM'] === '1'
    ? await client.acquire(key, { ttl, wait: 30_000, fences: [{ fence: resource.fence }] })
    : await client.acquire(key, { ttl, wait: 30_000 });
if (r.status !== 'acquired') {
  print({
    event: 'failed',
    status: r.status,
    ...(r.status === 'claim_failed'
      ? { reason: r.reason, cause: r.reason === 'unavailable' ? String(r.cause) : undefined }
      : {}),
  });
  process.exit(1);
}
const token = r.lease.token;
print({ event: 'acquired', token: token.toString() });
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.startsWith('write ')) break;
  print({ event: 'wrote', ...(await resource.write(token, line.slice('write '.length))) });
}
await resource.close();
await client.close();
await store.close();
