// `node build/bench/postgres-handoff-probe.js [seconds] [waiters] [OTHER_BUILD]`: where the time of a
// PostgreSQL hand-off goes. The scenario of bench/postgres.ts "handoff 8 hot" (waiters with
// `wait` on one key, each its own LeaseClient on one store), with the store's pool wrapped to
// time each statement and the store's LISTEN session watched for the release's
// notification. Prints the median of each step from the release being asked for to the next
// grant being returned. With OTHER_BUILD (a directory with `src/core/client.js` and
// `src/stores/postgres/store.js`, e.g. main's build), that build's store and client are probed.
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import * as ownClient from '../src/core/client.js';
import type { PgPool } from '../src/stores/postgres/client.js';
import * as ownStore from '../src/stores/postgres/store.js';

const PG_URL = process.env['LEASEHOLD_BENCH_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const seconds = Number(process.argv[2] ?? 3);
const waiters = Number(process.argv[3] ?? 8);
const otherDir = process.argv[4];
const base = otherDir === undefined ? undefined : pathToFileURL(resolve(otherDir) + '/').href;
const { LeaseClient } =
  base === undefined
    ? ownClient
    : ((await import(new URL('src/core/client.js', base).href)) as typeof ownClient);
const { PostgresLeaseStore } =
  base === undefined
    ? ownStore
    : ((await import(new URL('src/stores/postgres/store.js', base).href)) as typeof ownStore);

type Kind = 'grant' | 'release' | 'other';
interface Mark {
  kind: Kind;
  sent: number;
  answered?: number;
}
const marks: Mark[] = [];
const notes: number[] = [];

function kindOf(text: string): Kind {
  if (/_acquire"?\(/.test(text)) return 'grant';
  if (text.includes("lease_until = '-infinity'")) return 'release';
  return 'other';
}

const inner = new pg.Pool({ connectionString: PG_URL, max: 32 });
inner.on('error', () => undefined);
const pool: PgPool = {
  options: inner.options,
  query: async (text: string) => {
    const m: Mark = { kind: kindOf(text), sent: performance.now() };
    marks.push(m);
    const r = await inner.query(text);
    m.answered = performance.now();
    return r;
  },
  connect: () => inner.connect(),
  end: () => inner.end(),
};

const schema = `lh_probe_${process.pid}_${randomBytes(3).toString('hex')}`;
const store = new PostgresLeaseStore({ pool, schema });
await store.migrate();
const clients = Array.from(
  { length: waiters },
  (_, i) => new LeaseClient({ store, ownerId: `w-${i}` }),
);
const key = `probe/${randomBytes(3).toString('hex')}`;
let hooked = false;
const hook = (): void => {
  if (hooked) return;
  const session = (store as unknown as { listener: { client?: pg.Client } }).listener.client;
  if (session === undefined) return;
  hooked = true;
  session.on('notification', (n) => {
    if (n.payload === key) notes.push(performance.now());
  });
};

interface Handoff {
  releaseAsked: number;
  granted: number;
}
const handoffs: Handoff[] = [];
let releasedAt: number | undefined;
const until = performance.now() + seconds * 1000;
await Promise.all(
  clients.map(async (c) => {
    while (performance.now() < until) {
      const left = Math.max(1, Math.ceil(until - performance.now()));
      const r = await c.acquire(key, { ttl: 10_000, wait: left + 1000 });
      if (r.status !== 'acquired') continue;
      hook();
      const now = performance.now();
      if (releasedAt !== undefined) handoffs.push({ releaseAsked: releasedAt, granted: now });
      releasedAt = performance.now();
      await r.lease.release();
    }
  }),
);
await Promise.all(clients.map((c) => c.close()));
await store.close();
const admin = new pg.Client({ connectionString: PG_URL });
await admin.connect();
await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
await admin.end();
await inner.end();

// For each hand-off: the first release sent after it was asked for, the notification after
// that release was sent, and the grant whose answer came last before the waiter held.
const med = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s[Math.floor((s.length - 1) / 2)]!;
};
const steps: Record<string, number[]> = {
  'release asked → release sent': [],
  'release sent → release answered': [],
  'release sent → notification': [],
  'notification → grant sent': [],
  'release answered → grant sent': [],
  'grant sent → grant answered': [],
  'grant answered → acquire returned': [],
  total: [],
};
let byNotification = 0;
for (const h of handoffs) {
  const rel = marks.find((m) => m.kind === 'release' && m.sent >= h.releaseAsked);
  const grant = marks
    .filter((m) => m.kind === 'grant' && m.answered !== undefined && m.answered <= h.granted)
    .at(-1);
  if (rel?.answered === undefined || grant?.answered === undefined || grant.sent < rel.sent)
    continue;
  const note = notes.find((t) => t >= rel.sent);
  steps['release asked → release sent']!.push(rel.sent - h.releaseAsked);
  steps['release sent → release answered']!.push(rel.answered - rel.sent);
  if (note !== undefined && note <= grant.sent) {
    byNotification++;
    steps['release sent → notification']!.push(note - rel.sent);
    steps['notification → grant sent']!.push(grant.sent - note);
  } else {
    steps['release answered → grant sent']!.push(grant.sent - rel.answered);
  }
  steps['grant sent → grant answered']!.push(grant.answered - grant.sent);
  steps['grant answered → acquire returned']!.push(h.granted - grant.answered);
  steps['total']!.push(h.granted - h.releaseAsked);
}
console.log(
  `${handoffs.length} hand-offs between ${waiters} waiters in ${seconds} s; ${byNotification} woken by the notification; statements: ` +
    `${marks.filter((m) => m.kind === 'grant').length} grants, ${marks.filter((m) => m.kind === 'release').length} releases, ${marks.filter((m) => m.kind === 'other').length} other`,
);
for (const [name, xs] of Object.entries(steps)) {
  console.log(`  ${name.padEnd(36)} p50 ${med(xs).toFixed(3)} ms  (n=${xs.length})`);
}
