import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { HARNESSES } from '../contract/harnesses/index.js';
import type { StoreHarness } from '../contract/harness.js';
import { uniqueKey } from '../support/keys.js';
import {
  startTestServer,
  TEST_AUTH,
  TEST_TOKENS,
  type TestServer,
} from '../support/lease-server.js';

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

/**
 * Every route of the API, answered by a server over each store, checked against the OpenAPI
 * document (the server fixture checks every answer it sends; `close()` fails on a violation).
 * The stores measure time differently (PostgreSQL in microseconds, Redis and etcd in whole
 * milliseconds), which is what the document's integers must survive.
 */
const STORES = ['memory', 'sqlite', 'postgres', 'redis', 'etcd'] as const;

function caller(url: string) {
  return async (
    method: string,
    path: string,
    body?: unknown,
    token: string | null = TEST_TOKENS.admin,
  ): Promise<Answer> => {
    const headers: Record<string, string> = {};
    if (token !== null) headers['authorization'] = `Bearer ${token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${url}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    const json = (res.headers.get('content-type') ?? '').startsWith('application/json')
      ? (JSON.parse(text) as Record<string, unknown>)
      : { text };
    return { status: res.status, body: json };
  };
}

for (const kind of STORES) {
  describe(`the OpenAPI document describes every answer over the ${kind} store`, () => {
    const harness: StoreHarness = HARNESSES[kind]!();
    let t: TestServer | undefined;
    after(async () => {
      try {
        await t?.close();
      } finally {
        await harness.teardown();
      }
    });

    it(
      'answers every route, success and error, as the document says',
      { timeout: 60_000 },
      async () => {
        const store = await harness.open();
        t = await startTestServer({ store, auth: TEST_AUTH });
        const call = caller(t.url);
        const key = uniqueKey(`openapi-${kind}`);
        const enc = encodeURIComponent(key);
        let calls = 0;
        const expect = async (status: number, p: Promise<Answer>): Promise<Answer> => {
          calls++;
          const a = await p;
          assert.equal(a.status, status, `${a.status} ${JSON.stringify(a.body)}`);
          return a;
        };

        for (const path of [
          '/v1/info',
          '/healthz',
          '/readyz',
          '/metrics',
          '/v1/openapi.json',
          '/',
        ]) {
          await expect(200, call('GET', path, undefined, null));
        }
        const got = await expect(200, call('POST', '/v1/acquire', { key, ttl: '30s', value: 'v' }));
        const { leaseId, token } = got.body as { leaseId: string; token: string };
        await expect(409, call('POST', '/v1/acquire', { key, ttl: '30s' }));
        await expect(409, call('POST', '/v1/acquire', { key, ttl: '30s', wait: '150ms' }));
        await expect(400, call('POST', '/v1/acquire', { key, ttl: -5 }));
        await expect(400, call('POST', '/v1/acquire', '{"key":'));
        await expect(401, call('POST', '/v1/acquire', { key, ttl: '1s' }, null));
        await expect(403, call('POST', '/v1/acquire', { key, ttl: '1s' }, TEST_TOKENS.reader));
        await expect(
          413,
          call('POST', '/v1/acquire', { key, ttl: '1s', value: 'x'.repeat(20_000) }),
        );
        await expect(200, call('GET', `/v1/leases/${enc}`));
        await expect(200, call('GET', `/v1/leases?prefix=${encodeURIComponent('test/')}&limit=5`));
        await expect(200, call('POST', '/v1/renew', { key, leaseId, token, ttl: '30s' }));
        const otherId = '00000000-0000-4000-8000-000000000000';
        await expect(409, call('POST', '/v1/renew', { key, leaseId: otherId, token, ttl: '30s' }));
        await expect(
          200,
          call('POST', '/v1/batch', {
            ops: [
              { op: 'renew', key, leaseId, token, ttl: '30s' },
              { op: 'acquire', key, ttl: '30s' },
              { op: 'release', key, leaseId: otherId, token },
            ],
          }),
        );
        await expect(200, call('POST', '/v1/release', { key, leaseId, token }));
        await expect(409, call('POST', '/v1/release', { key, leaseId, token }));
        await expect(410, call('POST', '/v1/renew', { key, leaseId, token, ttl: '30s' }));

        const name = `e-${uniqueKey(kind).replaceAll('/', '-')}`;
        const elected = await expect(
          200,
          call('POST', `/v1/elections/${name}/campaign`, { ttl: '30s', value: 'addr' }),
        );
        await expect(409, call('POST', `/v1/elections/${name}/campaign`, { ttl: '30s' }));
        await expect(200, call('GET', `/v1/elections/${name}`));
        const { leaseId: eid, epoch } = elected.body as { leaseId: string; epoch: string };
        await expect(200, call('POST', `/v1/elections/${name}/resign`, { leaseId: eid, epoch }));
        await expect(409, call('POST', `/v1/elections/${name}/resign`, { leaseId: eid, epoch }));
        await expect(
          200,
          call('POST', '/v1/fence-decisions', {
            key,
            token,
            result: 'stale_fence',
            highWaterMark: '7',
          }),
        );
        await expect(404, call('GET', '/v1/nothing-here'));

        assert.deepEqual(t.contract.violations, []);
        assert.equal(t.contract.checked(), calls, 'every answer passed the check');
      },
    );
  });
}
