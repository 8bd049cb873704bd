import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { context, propagation, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { LeaseClient, type Lease } from '../../src/index.js';
import { createLeaseServer, type LeaseServer } from '../../src/server/index.js';
import { HttpLeaseStore } from '../../src/stores/http/index.js';
import { PostgresLeaseStore } from '../../src/stores/postgres/index.js';
import { dropSchema, PG_URL, uniqueSchema } from '../support/postgres.js';
import { eventually } from '../support/time.js';
import { registerTraceSdk } from '../support/trace-sdk.js';
import { uniqueKey } from '../../src/testing/kit/wait.js';

const sdk = registerTraceSdk();

/** The one finished span named `name` whose parent is `parent`, once it has ended. */
function childNamed(parent: ReadableSpan | { spanContext(): { spanId: string } }, name: string) {
  return eventually(`span ${name}`, () => {
    const found = sdk.childrenOf(parent as ReadableSpan).filter((s) => s.name === name);
    assert.ok(found.length <= 1, `one ${name} under its parent, got ${found.length}`);
    return found[0];
  });
}

describe('traces through the server: client → server → PostgreSQL', () => {
  const schema = uniqueSchema('traces');
  let pgStore: PostgresLeaseStore;
  let server: LeaseServer;
  let url: string;
  let store: HttpLeaseStore;
  let client: LeaseClient;

  before(async () => {
    pgStore = new PostgresLeaseStore({ connectionString: PG_URL, schema });
    server = createLeaseServer({ store: pgStore, port: 0, logLevel: 'silent', closeStore: true });
    url = await server.listen();
    store = await HttpLeaseStore.connect({ url });
    client = new LeaseClient({ store, ownerId: 'trace-worker' });
  });
  after(async () => {
    await client.close();
    await store.close();
    await server.close();
    await dropSchema(schema);
    await sdk.shutdown();
  });

  it('acquire, renew and release: a server span under the caller span, a database span under it', async () => {
    const key = uniqueKey('traced');
    const port = Number(new URL(url).port);
    let lease!: Lease;
    const root = await sdk.inRootSpan('app.work', async (span) => {
      const r = await client.acquire(key, { ttl: '30s' });
      assert.equal(r.status, 'acquired');
      lease = (r as { lease: Lease }).lease;
      assert.equal((await lease.renew()).status, 'renewed');
      await lease.release();
      return span;
    });
    const traceId = root.spanContext().traceId;
    const token = lease.token.toString();

    for (const [route, operation, result] of [
      ['/v1/acquire', 'acquire', 'acquired'],
      ['/v1/renew', 'renew', 'renewed'],
      ['/v1/release', 'release', 'released'],
    ] as const) {
      const http = await childNamed(root, `POST ${route}`);
      assert.equal(http.kind, SpanKind.SERVER);
      assert.equal(http.spanContext().traceId, traceId, 'the caller trace, continued');
      assert.deepEqual(
        {
          method: http.attributes['http.request.method'],
          route: http.attributes['http.route'],
          path: http.attributes['url.path'],
          scheme: http.attributes['url.scheme'],
          status: http.attributes['http.response.status_code'],
          address: http.attributes['server.address'],
          port: http.attributes['server.port'],
        },
        {
          method: 'POST',
          route,
          path: route,
          scheme: 'http',
          status: 200,
          address: '127.0.0.1',
          port,
        },
      );
      assert.equal(http.attributes['leasehold.operation'], operation);
      assert.equal(http.attributes['leasehold.key'], key);
      assert.equal(http.attributes['leasehold.result'], result);
      assert.equal(http.attributes['leasehold.token'], token, 'tokens as decimal strings');
      assert.equal(http.attributes['leasehold.lease_id_prefix'], lease.leaseId.slice(0, 8));
      if (operation === 'acquire') assert.equal(http.attributes['leasehold.owner'], 'trace-worker');
      assert.equal(http.status.code, SpanStatusCode.UNSET);

      // The store call the route made, as a database client span.
      const db = await childNamed(http, `${operation} postgresql`);
      assert.equal(db.kind, SpanKind.CLIENT);
      assert.equal(db.spanContext().traceId, traceId);
      assert.equal(db.attributes['db.system.name'], 'postgresql');
      assert.equal(db.attributes['db.operation.name'], operation);
      assert.ok(
        db.startTime[0] * 1e9 + db.startTime[1] >= http.startTime[0] * 1e9 + http.startTime[1],
      );
      assert.equal(sdk.childrenOf(db).length, 0);
    }
  });

  it('a fence decision and a refused request are spans too; a request without traceparent starts its own trace', async () => {
    const key = uniqueKey('fence');
    const root = await sdk.inRootSpan('app.fence', async (span) => {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      propagation.inject(context.active(), headers);
      const reported = await fetch(`${url}/v1/fence-decisions`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ key, token: '7', result: 'stale_fence', highWaterMark: '9' }),
      });
      assert.equal(reported.status, 200);
      // A release of a lease nobody holds: refused by the route, after asking the store.
      const refused = await fetch(`${url}/v1/release`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ key, leaseId: randomUUID(), token: '1' }),
      });
      assert.equal(refused.status, 409);
      return span;
    });
    const fence = await childNamed(root, 'POST /v1/fence-decisions');
    assert.equal(fence.kind, SpanKind.SERVER);
    assert.equal(fence.attributes['leasehold.operation'], 'fence_decision');
    assert.equal(fence.attributes['leasehold.result'], 'stale_fence');
    assert.equal(fence.attributes['leasehold.fence.result'], 'stale_fence');
    assert.equal(fence.attributes['leasehold.token'], '7');
    assert.equal(sdk.childrenOf(fence).length, 0, 'a fence decision makes no store call');

    const refused = await childNamed(root, 'POST /v1/release');
    assert.equal(refused.attributes['http.response.status_code'], 409);
    assert.equal(refused.attributes['leasehold.result'], 'not_owner');
    assert.equal(refused.attributes['leasehold.token'], '1');
    await childNamed(refused, 'release postgresql');
    assert.equal(refused.status.code, SpanStatusCode.UNSET, 'a 4xx is the caller error');

    // No traceparent: the server span is the root of a new trace.
    const before = sdk.named('GET /v1/leases/*').length;
    const got = await fetch(`${url}/v1/leases/${encodeURIComponent(key)}`);
    assert.equal(got.status, 200);
    const own = await eventually('the untraced request span', () =>
      sdk.named('GET /v1/leases/*').length > before
        ? sdk.named('GET /v1/leases/*').at(-1)
        : undefined,
    );
    assert.equal(own.parentSpanContext, undefined);
    assert.notEqual(own.spanContext().traceId, root.spanContext().traceId);
    const inspect = await childNamed(own, 'inspect postgresql');
    assert.equal(inspect.attributes['db.operation.name'], 'inspect');
  });
});
