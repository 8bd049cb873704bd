import assert from 'node:assert/strict';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import type { LeaseState } from '../../src/core/types.js';
import { createLeaseServer } from '../../src/server/server.js';
import { MemoryLeaseStore } from '../../src/stores/memory/store.js';
import { SqliteLeaseStore } from '../../src/stores/sqlite/store.js';
import { uniqueKey } from '../support/keys.js';
import {
  startTestServer,
  TEST_AUTH,
  TEST_TOKENS,
  type TestServer,
} from '../support/lease-server.js';
import { selfSignedCert } from '../support/tls.js';
import { tempDir } from '../support/tmp.js';

const { jobs: JOBS, reader: READER, admin: ADMIN } = TEST_TOKENS;
const AUTH = TEST_AUTH;

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

function call(
  url: string,
  method: string,
  path: string,
  opts: { token?: string; body?: unknown; raw?: string; contentType?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (opts.token !== undefined) headers['authorization'] = `Bearer ${opts.token}`;
  let body: string | undefined;
  if (opts.raw !== undefined || opts.body !== undefined) {
    headers['content-type'] = opts.contentType ?? 'application/json';
    body = opts.raw ?? JSON.stringify(opts.body);
  }
  return fetch(`${url}${path}`, { method, headers, body }).then(async (res) => ({
    status: res.status,
    body: (await res.json()) as Record<string, unknown>,
  }));
}

function errorOf(a: Answer): { code: string; message: string } {
  return a.body['error'] as { code: string; message: string };
}

const OPTS = () => ({ timeoutMs: 5000, signal: AbortSignal.timeout(5000) });

describe('server security', () => {
  let t: TestServer;
  const key = `jobs/${uniqueKey('sec')}`;
  let leaseId: string;
  let token: string;
  let before0: LeaseState;

  before(async () => {
    t = await startTestServer({ auth: AUTH });
    const a = await call(t.url, 'POST', '/v1/acquire', {
      token: JOBS,
      body: { key, ttl: '60s', value: 'v1' },
    });
    assert.equal(a.status, 200, JSON.stringify(a.body));
    leaseId = a.body['leaseId'] as string;
    token = a.body['token'] as string;
    before0 = await t.store.inspect(key, OPTS());
  });
  after(async () => {
    await t?.close();
  });

  /** Every refused request must leave the held lease exactly as it was. */
  async function assertUntouched(): Promise<void> {
    const now = await t.store.inspect(key, OPTS());
    assert.equal(now.lastToken, before0.lastToken, 'token counter moved');
    assert.equal(now.holder?.token, before0.holder?.token, 'holder changed');
    assert.equal(now.holder?.value, 'v1');
    assert.ok(
      (now.holder?.remainingMs ?? 0) <= (before0.holder?.remainingMs ?? 0),
      'a refused request extended the lease',
    );
  }

  it('answers 401 unauthenticated to every lease route without a valid bearer token', async () => {
    const routes: Array<[string, string, unknown]> = [
      ['POST', '/v1/acquire', { key, ttl: 1000 }],
      ['POST', '/v1/renew', { key, leaseId, token, ttl: 1000 }],
      ['POST', '/v1/release', { key, leaseId, token }],
      ['GET', `/v1/leases/${encodeURIComponent(key)}`, undefined],
      ['GET', '/v1/leases', undefined],
      ['GET', '/v1/events', undefined],
    ];
    for (const [method, path, body] of routes) {
      for (const bad of [undefined, 'not-a-known-token-0000000', `${JOBS}x`]) {
        const a = await call(t.url, method, path, { token: bad, body });
        assert.equal(
          a.status,
          401,
          `${method} ${path} with ${bad === undefined ? 'no' : 'a wrong'} token`,
        );
        assert.equal(errorOf(a).code, 'unauthenticated');
      }
    }
    const malformed = await fetch(`${t.url}/v1/leases`, {
      headers: { authorization: `Basic ${JOBS}` },
    });
    assert.equal(malformed.status, 401);
    await assertUntouched();
  });

  it('answers 403 permission_denied when a token scoped to jobs/ touches billing/x, or a read-only token writes', async () => {
    const other = 'billing/x';
    const cases: Array<[string, string, string, unknown]> = [
      [JOBS, 'POST', '/v1/acquire', { key: other, ttl: 1000 }],
      [JOBS, 'POST', '/v1/renew', { key: other, leaseId, token, ttl: 1000 }],
      [JOBS, 'POST', '/v1/release', { key: other, leaseId, token }],
      [JOBS, 'GET', `/v1/leases/${encodeURIComponent(other)}`, undefined],
      [JOBS, 'GET', '/v1/leases?prefix=billing%2F', undefined],
      [JOBS, 'GET', '/v1/events?prefix=billing%2F', undefined],
      [READER, 'POST', '/v1/acquire', { key, ttl: 1000 }],
      [READER, 'POST', '/v1/release', { key, leaseId, token }],
    ];
    for (const [bearer, method, path, body] of cases) {
      const a = await call(t.url, method, path, { token: bearer, body });
      assert.equal(a.status, 403, `${method} ${path}: ${JSON.stringify(a.body)}`);
      assert.equal(errorOf(a).code, 'permission_denied');
    }
    assert.equal(
      (await t.store.inspect(other, OPTS())).lastToken,
      0n,
      'billing/x was never granted',
    );
    await assertUntouched();
  });

  it('lists only the keys a scoped token may read', async () => {
    const admin = await call(t.url, 'POST', '/v1/acquire', {
      token: ADMIN,
      body: { key: 'billing/y', ttl: '60s' },
    });
    assert.equal(admin.status, 200);
    const jobs = await call(t.url, 'GET', '/v1/leases', { token: JOBS });
    const keys = (jobs.body['leases'] as Array<{ key: string }>).map((l) => l.key);
    assert.ok(keys.includes(key));
    assert.ok(!keys.includes('billing/y'), `jobs token saw ${keys.join(',')}`);
    const all = await call(t.url, 'GET', '/v1/leases', { token: READER });
    assert.ok((all.body['leases'] as Array<{ key: string }>).some((l) => l.key === 'billing/y'));
  });

  it('answers 409 not_owner to renew and release with a wrong lease id, and the holder is untouched', async () => {
    const wrong = '00000000-0000-4000-8000-000000000000';
    const renew = await call(t.url, 'POST', '/v1/renew', {
      token: JOBS,
      body: { key, leaseId: wrong, token, ttl: '1h' },
    });
    assert.equal(renew.status, 409, JSON.stringify(renew.body));
    assert.equal(errorOf(renew).code, 'not_owner');
    const release = await call(t.url, 'POST', '/v1/release', {
      token: JOBS,
      body: { key, leaseId: wrong, token },
    });
    assert.equal(release.status, 409);
    assert.equal(errorOf(release).code, 'not_owner');
    const higher = await call(t.url, 'POST', '/v1/release', {
      token: JOBS,
      body: { key, leaseId, token: (BigInt(token) + 1n).toString() },
    });
    assert.equal(
      higher.status,
      409,
      'the right lease id with a wrong token is not the owner either',
    );
    await assertUntouched();
    const ok = await call(t.url, 'POST', '/v1/renew', {
      token: JOBS,
      body: { key, leaseId, token, ttl: '60s' },
    });
    assert.equal(ok.status, 200, 'the real holder can still renew');
    before0 = await t.store.inspect(key, OPTS());
  });

  it('answers 413 payload_too_large to an oversize body and changes nothing', async () => {
    const a = await call(t.url, 'POST', '/v1/acquire', {
      token: JOBS,
      body: { key: `jobs/big`, ttl: 1000, value: 'x'.repeat(64 * 1024) },
    });
    assert.equal(a.status, 413);
    assert.equal(errorOf(a).code, 'payload_too_large');
    assert.equal((await t.store.inspect('jobs/big', OPTS())).lastToken, 0n);
    await assertUntouched();
  });

  it('answers 400 invalid_argument naming the field to malformed JSON, wrong types and non-canonical tokens', async () => {
    const renewWith = (tok: unknown): unknown => ({ key, leaseId, token: tok, ttl: '60s' });
    const cases: Array<
      [string, string, { body?: unknown; raw?: string; contentType?: string }, string]
    > = [
      ['malformed JSON', '/v1/acquire', { raw: '{"key": "jobs/a", ' }, 'body'],
      ['JSON array body', '/v1/acquire', { raw: '[1,2]' }, 'body'],
      ['JSON null body', '/v1/acquire', { raw: 'null' }, 'body'],
      ['empty body', '/v1/acquire', { raw: '' }, 'body'],
      ['text/plain body', '/v1/acquire', { raw: 'key=jobs/a', contentType: 'text/plain' }, 'body'],
      ['key as a number', '/v1/acquire', { body: { key: 42, ttl: 1000 } }, 'key'],
      ['key missing', '/v1/acquire', { body: { ttl: 1000 } }, 'key'],
      ['key with NUL', '/v1/acquire', { body: { key: 'jobs/a\u0000b', ttl: 1000 } }, 'key'],
      ['ttl as a boolean', '/v1/acquire', { body: { key: 'jobs/t', ttl: true } }, 'ttl'],
      [
        'ttl as a bare numeric string',
        '/v1/acquire',
        { body: { key: 'jobs/t', ttl: '1000' } },
        'ttl',
      ],
      ['fractional ttl', '/v1/acquire', { body: { key: 'jobs/t', ttl: 1.5 } }, 'ttl'],
      ['negative wait', '/v1/acquire', { body: { key: 'jobs/t', ttl: 1000, wait: -1 } }, 'wait'],
      [
        'unknown field',
        '/v1/acquire',
        { body: { key: 'jobs/t', ttl: 1000, admin: true } },
        'admin',
      ],
      ['malformed lease id', '/v1/release', { body: { key, leaseId: 'x', token } }, 'leaseId'],
      ['token as a JSON number', '/v1/renew', { body: renewWith(12) }, 'token'],
      ['token null', '/v1/renew', { body: renewWith(null) }, 'token'],
      ['token [1]', '/v1/renew', { body: renewWith([1]) }, 'token'],
      ['token {"$gt":0}', '/v1/renew', { body: renewWith({ $gt: 0 }) }, 'token'],
      ['token true', '/v1/renew', { body: renewWith(true) }, 'token'],
      ...[
        '12abc',
        '0x10',
        '1e3',
        ' 5',
        '5 ',
        '+5',
        '007',
        '',
        '-1',
        '0',
        '1.5',
        '٣',
        '9223372036854775808',
        '99999999999999999999',
      ].map((tok): [string, string, { body: unknown }, string] => [
        `token ${JSON.stringify(tok)}`,
        '/v1/renew',
        { body: renewWith(tok) },
        'token',
      ]),
      [
        'token "12abc" on release',
        '/v1/release',
        { body: { key, leaseId, token: '12abc' } },
        'token',
      ],
    ];
    for (const [what, path, opts, field] of cases) {
      const a = await call(t.url, 'POST', path, { token: JOBS, ...opts });
      assert.equal(a.status, 400, `${what}: ${JSON.stringify(a.body)}`);
      const e = errorOf(a);
      assert.equal(e.code, 'invalid_argument', what);
      assert.ok(e.message.startsWith(field), `${what}: message should name ${field}: ${e.message}`);
    }
    const badQuery = await call(t.url, 'GET', '/v1/leases?limit=abc', { token: JOBS });
    assert.equal(badQuery.status, 400);
    assert.ok(errorOf(badQuery).message.startsWith('limit'), errorOf(badQuery).message);
    for (const k of ['jobs/a', 'jobs/t', 'jobs/a\u0000b']) {
      assert.equal(
        (await t.store.inspect(k.replace('\u0000', ''), OPTS())).lastToken,
        0n,
        `${k} was granted`,
      );
    }
    await assertUntouched();
  });

  it('serves unauthenticated probes, metrics and the OpenAPI document', async () => {
    for (const path of ['/healthz', '/readyz', '/v1/openapi.json', '/v1/info']) {
      const res = await fetch(`${t.url}${path}`);
      assert.equal(res.status, 200, path);
    }
    const doc = (await (await fetch(`${t.url}/v1/openapi.json`)).json()) as {
      paths: Record<string, unknown>;
    };
    assert.ok('/v1/acquire' in doc.paths && '/v1/events' in doc.paths);
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    assert.match(
      metrics,
      /leasehold_auth_failures_total\{[^}]*code="unauthenticated"[^}]*\} [1-9]/,
    );
    assert.match(metrics, /leasehold_acquisitions_total\{[^}]*result="acquired"/);
    assert.ok(!metrics.includes(key), 'metrics must not carry per-key labels');
  });
});

describe('server logs and TLS', () => {
  it('never writes a bearer secret or a full lease id to its logs', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        lines.push(chunk.toString());
        cb();
      },
    });
    const store = new MemoryLeaseStore();
    const server = createLeaseServer({
      store,
      port: 0,
      auth: AUTH,
      logger: pino({ level: 'trace' }, sink),
      processMetrics: false,
    });
    const url = await server.listen();
    try {
      const a = await call(url, 'POST', '/v1/acquire', {
        token: JOBS,
        body: { key: 'jobs/log', ttl: '5s' },
      });
      const leaseId = a.body['leaseId'] as string;
      await call(url, 'POST', '/v1/renew', {
        token: JOBS,
        body: { key: 'jobs/log', leaseId, token: a.body['token'], ttl: '5s' },
      });
      await call(url, 'POST', '/v1/acquire', {
        token: 'wrong-secret-000000000000',
        body: { key: 'jobs/log', ttl: '5s' },
      });
      await call(url, 'POST', '/v1/release', {
        token: JOBS,
        body: { key: 'jobs/log', leaseId, token: a.body['token'] },
      });
      const text = lines.join('');
      assert.ok(lines.length > 0, 'the server logged something at trace level');
      assert.ok(text.includes(leaseId.slice(0, 8)), 'the lease id prefix may be logged');
      for (const secret of [JOBS, 'wrong-secret-000000000000', leaseId]) {
        assert.ok(!text.includes(secret), `log contains ${secret.slice(0, 6)}…`);
      }
    } finally {
      await server.close();
      await store.close();
    }
  });

  it('serves HTTPS when given a certificate and key', async () => {
    const tmp = tempDir('tls');
    try {
      const { cert, key } = selfSignedCert(tmp.dir);
      const store = new SqliteLeaseStore({ path: join(tmp.dir, 'l.db') });
      const server = createLeaseServer({
        store,
        port: 0,
        tls: { cert, key },
        logLevel: 'silent',
        processMetrics: false,
      });
      const url = await server.listen();
      try {
        assert.match(url, /^https:\/\//);
        const body = await new Promise<string>((resolve, reject) => {
          const req = httpsRequest(
            `${url}/v1/acquire`,
            {
              method: 'POST',
              ca: cert,
              headers: { 'content-type': 'application/json' },
            },
            (res) => {
              let text = '';
              res.on('data', (c: Buffer) => (text += c.toString()));
              res.on('end', () => resolve(text));
            },
          );
          req.on('error', reject);
          req.end(JSON.stringify({ key: 'tls/a', ttl: '5s' }));
        });
        assert.equal((JSON.parse(body) as { status: string }).status, 'acquired');
      } finally {
        await server.close();
        await store.close();
      }
    } finally {
      tmp.remove();
    }
  });
});
