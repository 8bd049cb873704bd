// A Node service of its own, in its own process, with `createFenceMiddleware` in front of its
// resource: a SQLite table report(id, body) at RESOURCE_PATH that `PUT /reports/:id` upserts
// (scope `report/<id>`), marks in SQLite at MARKS_PATH. The service exposes its fence's claim
// as `POST /_leasehold/claim` with the gateway's wire format (`{"scope","token"}` → 200
// applied, or 409 stale_fence with Fencing-Mark), so a lease holder in another process claims
// on it through GatewayClaimClient. Prints {"url":"http://127.0.0.1:<port>"} once listening.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Database from 'better-sqlite3';
import { createFenceMiddleware, MARK_HEADER } from '../../../src/fencing/http/index.js';
import { fenceErrorBody } from '../../../src/fencing/http/fence-error.js';
import { SqliteMarkStore } from '../../../src/fencing/marks/sqlite.js';

const env = (name: string): string => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`middleware service: ${name} is not set`);
  return v;
};

const db = new Database(env('RESOURCE_PATH'), { timeout: 5000 });
db.pragma('journal_mode = WAL');
db.exec('CREATE TABLE IF NOT EXISTS report (id TEXT PRIMARY KEY, body TEXT NOT NULL)');
const upsert = db.prepare(
  'INSERT INTO report (id, body) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET body = excluded.body',
);
const marks = new SqliteMarkStore({ path: env('MARKS_PATH') });
const scopeOf = (url: string | undefined): string | undefined =>
  url?.startsWith('/reports/') === true ? `report/${url.slice('/reports/'.length)}` : undefined;
const fenced = createFenceMiddleware({ marks, scope: (req) => scopeOf(req.url) });

const readBody = (req: NodeJS.ReadableStream): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });

const server = createServer((req, res) => {
  if (req.method === 'POST' && req.url === '/_leasehold/claim') {
    void readBody(req)
      .then(async (text) => {
        const { scope, token } = JSON.parse(text) as { scope: string; token: string };
        const r = await fenced.fence.claim(scope, token);
        res.setHeader('content-type', 'application/json; charset=utf-8');
        if (r.status === 'applied') return res.end(JSON.stringify({ status: 'applied' }));
        res.statusCode = 409;
        res.setHeader(MARK_HEADER, r.highWaterMark.toString());
        res.end(fenceErrorBody('stale_fence', `a newer token holds scope ${scope}`));
      })
      .catch((err: unknown) => {
        res.statusCode = 503;
        res.end(fenceErrorBody('unavailable', String(err)));
      });
    return;
  }
  fenced(req, res, (err) => {
    if (err !== undefined) {
      res.statusCode = 500;
      return res.end();
    }
    const scope = scopeOf(req.url);
    void readBody(req).then((body) => {
      if (scope !== undefined) upsert.run(scope, body);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ ok: true }));
    });
  });
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${port}` }) + '\n');
});
