// `node build/bench/postgres-cross-process-handoff.js [handoffs] [OTHER_BUILD]`: the hand-off
// between two processes, each with its own PostgresLeaseStore and LeaseClient on one key (the
// shape of two replicas). The coordinator forks two children; the waiter parks in
// `acquire({ wait })` while the other holds, then the holder releases. Prints the p50 / p90 of
// release asked → the waiter's acquire returned (both read on the machine's high-resolution
// clock), and for a few hand-offs when the waiter was woken and its grant sent and answered.
// With OTHER_BUILD (a directory with `src/core/client.js` and `src/stores/postgres/store.js`)
// that build's children are measured.
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import pg from 'pg';
import type * as ClientModule from '../src/core/client.js';
import type { Lease } from '../src/core/lease.js';
import type { PgPool } from '../src/drivers/postgres/client.js';
import type * as StoreModule from '../src/stores/postgres/store.js';

const PG_URL = process.env['LEASEHOLD_BENCH_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const KEY = 'bench/cross-process-handoff';
const now = (): number => performance.timeOrigin + performance.now();

interface Marks {
  wake: number[];
  sent: number[];
  answered: number[];
}
type Order = { op: 'acquire' } | { op: 'release' } | { op: 'exit' };
type Report = { t: number; status?: string; marks?: Marks };

async function child(buildDir: string, schema: string): Promise<void> {
  const base = pathToFileURL(resolve(buildDir) + '/').href;
  const { PostgresLeaseStore } = (await import(
    new URL('src/stores/postgres/store.js', base).href
  )) as typeof StoreModule;
  const { LeaseClient } = (await import(
    new URL('src/core/client.js', base).href
  )) as typeof ClientModule;
  const store = new PostgresLeaseStore({ connectionString: PG_URL, schema, maxConnections: 2 });
  await store.migrate();
  const marks: Marks = { wake: [], sent: [], answered: [] };
  // Wake-ups from notifications, and the grant statements (internals, for the breakdown).
  const listener = (store as unknown as { listener: { wake: (k: string, c?: string) => void } })
    .listener;
  const wake = listener.wake.bind(listener);
  listener.wake = (k, c) => {
    if (c === undefined) marks.wake.push(now());
    wake(k, c);
  };
  const own = (store as unknown as { pool: PgPool }).pool;
  const query = own.query.bind(own);
  own.query = async (text: string) => {
    const grant = /_grant"\(|_acquire"\(/.test(text);
    if (grant) marks.sent.push(now());
    const r = await query(text);
    if (grant) marks.answered.push(now());
    return r;
  };
  const client = new LeaseClient({ store, ownerId: `p${process.pid}` });
  let lease: Lease | undefined;
  const send = (r: Report | 'ready'): void => void process.send?.(r);
  process.on('message', (m: Order) => {
    void (async () => {
      if (m.op === 'acquire') {
        const r = await client.acquire(KEY, { ttl: 10_000, wait: 5000 });
        const t = now();
        lease = r.status === 'acquired' ? r.lease : undefined;
        send({ t, status: r.status, marks: { ...marks } });
        marks.wake = [];
        marks.sent = [];
        marks.answered = [];
      } else if (m.op === 'release') {
        const t = now();
        await lease?.release();
        send({ t });
      } else {
        await client.close();
        await store.close();
        process.exit(0);
      }
    })();
  });
  send('ready');
}

async function coordinator(handoffs: number, buildDir: string): Promise<void> {
  const schema = `lh_xproc_${process.pid}_${randomBytes(3).toString('hex')}`;
  const self = fileURLToPath(import.meta.url);
  const kids: ChildProcess[] = [0, 1].map(() => fork(self, ['--child', buildDir, schema]));
  const next = (k: ChildProcess): Promise<Report> =>
    new Promise((res) => k.once('message', (m) => res(m as Report)));
  try {
    await Promise.all(kids.map(next));
    let holder = 0;
    kids[0]!.send({ op: 'acquire' });
    await next(kids[0]!);
    const lat: number[] = [];
    const detail: string[] = [];
    for (let i = 0; i < handoffs; i++) {
      const waiter = 1 - holder;
      kids[waiter]!.send({ op: 'acquire' });
      // Let the waiter park (try, busy, watch) before the release.
      await new Promise((r) => setTimeout(r, 5));
      const got = next(kids[waiter]!);
      kids[holder]!.send({ op: 'release' });
      const rel = await next(kids[holder]!);
      const acq = await got;
      if (acq.status !== 'acquired') throw new Error(`hand-off ${i}: ${acq.status}`);
      lat.push(acq.t - rel.t);
      if (i % Math.max(1, Math.floor(handoffs / 5)) === 1 && acq.marks !== undefined) {
        const after = (xs: number[]): string =>
          xs
            .filter((x) => x >= rel.t)
            .map((x) => (x - rel.t).toFixed(2))
            .join(',') || '–';
        detail.push(
          `  hand-off ${i}: total ${(acq.t - rel.t).toFixed(2)} ms; woken ${after(acq.marks.wake)}, grant sent ${after(acq.marks.sent)}, answered ${after(acq.marks.answered)} ms after the release was asked`,
        );
      }
      holder = waiter;
    }
    kids[holder]!.send({ op: 'release' });
    await next(kids[holder]!);
    lat.sort((a, b) => a - b);
    const at = (q: number): string => lat[Math.floor((lat.length - 1) * q)]!.toFixed(3);
    console.log(
      `cross-process hand-off (${buildDir}): p50 ${at(0.5)} ms, p90 ${at(0.9)} ms, ${lat.length} hand-offs`,
    );
    for (const d of detail) console.log(d);
  } finally {
    for (const k of kids) k.send({ op: 'exit' });
    await Promise.all(kids.map((k) => new Promise((r) => k.once('exit', r))));
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

if (process.argv[2] === '--child') {
  await child(process.argv[3]!, process.argv[4]!);
} else {
  const here = resolve(fileURLToPath(import.meta.url), '../..');
  await coordinator(Number(process.argv[2] ?? 300), process.argv[3] ?? here);
}
