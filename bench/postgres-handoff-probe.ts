// `node build/bench/postgres-handoff-probe.js [seconds] [waiters] [OTHER_BUILD|-] [own|caller]`:
// where the time of a PostgreSQL hand-off goes. The scenario of bench/postgres.ts "handoff 8
// hot" (waiters with `wait` on one key, each its own LeaseClient on one store), with the
// store's pool timing each statement and the store's LISTEN session watched for the release's
// notification. Prints the median of each step from the release being asked for to the next
// grant being returned. With OTHER_BUILD (a directory with `src/core/client.js` and
// `src/stores/postgres/store.js`, e.g. main's build), that build's store and client are probed.
// `own` (the default, as the bench): the store opens its own pool, whose query is wrapped, so
// the store wakes its own waiters from the release's answer (decision 022); `caller`: the
// store gets a wrapped pool of ours, and only notifications wake. The grant counted for a
// hand-off is the winner's own (found by its lease id in the statement).
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import * as ownClient from '../src/core/client.js';
import type { PgPool } from '../src/drivers/postgres/client.js';
import * as ownStore from '../src/stores/postgres/store.js';

const PG_URL = process.env['LEASEHOLD_BENCH_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const seconds = Number(process.argv[2] ?? 3);
const waiters = Number(process.argv[3] ?? 8);
const otherDir = process.argv[4] === '-' ? undefined : process.argv[4];
const poolMode = process.argv[5] === 'caller' ? 'caller' : 'own';
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
  /** A grant's lease id (the second parameter of the grant, ::uuid). */
  leaseId?: string;
}
const marks: Mark[] = [];
const notes: number[] = [];

function kindOf(text: string): Kind {
  // A lone grant calls the grant wrapper (migration 0005), a batch or an older build the
  // grant function; a lone release calls the release function, others run the UPDATE.
  if (/_acquire"?\(|_grant"\(/.test(text)) return 'grant';
  if (text.includes("lease_until = '-infinity'") || text.includes('_release"(')) return 'release';
  return 'other';
}

/** `query` of `inner`, timing each statement into `marks`. */
function timed(inner: PgPool): PgPool['query'] {
  const query = inner.query.bind(inner);
  return async (text: string) => {
    const kind = kindOf(text);
    const m: Mark = { kind, sent: performance.now() };
    if (kind === 'grant') {
      const id = /'([0-9a-f-]{36})'::uuid/i.exec(text)?.[1];
      if (id !== undefined) m.leaseId = id.toLowerCase();
    }
    marks.push(m);
    const r = await query(text);
    m.answered = performance.now();
    return r;
  };
}

const inner = new pg.Pool({ connectionString: PG_URL, max: 32 });
inner.on('error', () => undefined);
const pool: PgPool = {
  options: inner.options,
  query: timed(inner),
  connect: () => inner.connect(),
  end: () => inner.end(),
};

const schema = `lh_probe_${process.pid}_${randomBytes(3).toString('hex')}`;
const store =
  poolMode === 'caller'
    ? new PostgresLeaseStore({ pool, schema })
    : new PostgresLeaseStore({ connectionString: PG_URL, schema, maxConnections: 32 });
if (poolMode === 'own') {
  // The store's own pool keeps its connect/remove events (its backends, decision 022); only
  // its query is wrapped.
  const own = (store as unknown as { pool: PgPool & { query: PgPool['query'] } }).pool;
  own.query = timed(own);
}
await store.migrate();
// Every wake-up the store's listener gives its watchers of a release (change undefined): from
// the store's own answer (`changed`, decision 022) or from a notification (`wake`).
const wakes: Array<{ at: number; via: 'answer' | 'notification' }> = [];
{
  const listener = (store as unknown as { listener: Record<string, unknown> }).listener;
  for (const [name, via] of [
    ['changed', 'answer'],
    ['wake', 'notification'],
  ] as const) {
    const original = listener[name] as ((k: string, c?: string) => void) | undefined;
    if (typeof original !== 'function') continue;
    listener[name] = (k: string, c?: string): void => {
      if (c === undefined) wakes.push({ at: performance.now(), via });
      original.call(listener, k, c);
    };
  }
}
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
  leaseId: string;
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
      if (releasedAt !== undefined) {
        handoffs.push({ releaseAsked: releasedAt, granted: now, leaseId: r.lease.leaseId });
      }
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
  'release sent → wake-up (answer)': [],
  'release sent → wake-up (notification)': [],
  'wake-up → grant sent': [],
  'grant sent → grant answered': [],
  'grant answered → acquire returned': [],
  total: [],
};
let byNotification = 0;
/** Hand-offs whose winning grant went out with no wake-up since the release was sent. */
let noWake = 0;
/** Hand-offs whose winning grant went out before the release was answered. */
let grantBeforeAnswer = 0;
for (const h of handoffs) {
  const rel = marks.find((m) => m.kind === 'release' && m.sent >= h.releaseAsked);
  const grant = marks
    .filter(
      (m) =>
        m.kind === 'grant' &&
        m.answered !== undefined &&
        m.answered <= h.granted &&
        (m.leaseId === undefined || m.leaseId === h.leaseId.toLowerCase()),
    )
    .at(-1);
  if (rel?.answered === undefined || grant?.answered === undefined || grant.sent < rel.sent)
    continue;
  const note = notes.find((t) => t >= rel.sent);
  steps['release asked → release sent']!.push(rel.sent - h.releaseAsked);
  steps['release sent → release answered']!.push(rel.answered - rel.sent);
  // With its own pool the store wakes its waiters when the release answers, and drops the
  // notification of its own release; only a caller's pool is woken by notifications.
  if (poolMode === 'caller' && note !== undefined && note <= grant.sent) {
    byNotification++;
    steps['release sent → notification']!.push(note - rel.sent);
    steps['notification → grant sent']!.push(grant.sent - note);
  } else {
    steps['release answered → grant sent']!.push(grant.sent - rel.answered);
  }
  const wake = wakes.filter((w) => w.at >= rel.sent && w.at <= grant.sent).at(-1);
  if (wake !== undefined) {
    steps[`release sent → wake-up (${wake.via})`]!.push(wake.at - rel.sent);
    steps['wake-up → grant sent']!.push(grant.sent - wake.at);
  } else noWake++;
  if (grant.sent < rel.answered) grantBeforeAnswer++;
  steps['grant sent → grant answered']!.push(grant.answered - grant.sent);
  steps['grant answered → acquire returned']!.push(h.granted - grant.answered);
  steps['total']!.push(h.granted - h.releaseAsked);
}
console.log(
  `${handoffs.length} hand-offs between ${waiters} waiters in ${seconds} s (${poolMode} pool); ${byNotification} woken by the notification; statements: ` +
    `${marks.filter((m) => m.kind === 'grant').length} grants, ${marks.filter((m) => m.kind === 'release').length} releases, ${marks.filter((m) => m.kind === 'other').length} other`,
);
console.log(
  `  winning grant sent with no wake-up since the release: ${noWake}; before the release was answered: ${grantBeforeAnswer}`,
);
for (const [name, xs] of Object.entries(steps)) {
  console.log(`  ${name.padEnd(36)} p50 ${med(xs).toFixed(3)} ms  (n=${xs.length})`);
}
