import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { readSse, type SseFrame } from '../../src/stores/http/notify.js';
import { startTestServer, type TestServer } from '../support/lease-server.js';
import { uniqueKey } from '../support/keys.js';
import { eventually } from '../support/time.js';

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

function call(
  url: string,
  method: string,
  path: string,
  opts: { token?: string; body?: unknown } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (opts.token !== undefined) headers['authorization'] = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  return fetch(`${url}${path}`, {
    method,
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  }).then(async (res) => ({
    status: res.status,
    body: (await res.json()) as Record<string, unknown>,
  }));
}

const code = (a: Answer): string => (a.body['error'] as { code: string }).code;

describe('election endpoints (campaign, observe, resign over HTTP)', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer();
  });
  after(() => t.close());

  it('elects, shows the leader with its epoch and value, hands over to a waiting campaigner after resign, with strictly increasing epochs', async () => {
    const name = uniqueKey('sched');
    const path = `/v1/elections/${encodeURIComponent(name)}`;
    const empty = await call(t.url, 'GET', path);
    assert.equal(empty.status, 200);
    assert.equal(empty.body['leader'], null);
    assert.equal(empty.body['lastEpoch'], '0');

    // Change events arrive on the ordinary event stream of the key election/NAME.
    const ac = new AbortController();
    const res = await fetch(`${t.url}/v1/events?key=${encodeURIComponent(`election/${name}`)}`, {
      signal: ac.signal,
    });
    const frames: SseFrame[] = [];
    const it = readSse(res.body as unknown as AsyncIterable<Uint8Array>);
    const first = await it.next();
    assert.equal(first.done === true ? 'end' : first.value.event, 'ready');
    const reading = (async () => {
      try {
        for await (const f of it) frames.push(f);
      } catch {
        // closed
      }
    })();

    const a = await call(t.url, 'POST', `${path}/campaign`, {
      body: { ttl: '30s', ownerId: 'node-a', value: 'http://10.0.0.1:8080' },
    });
    assert.equal(a.status, 200, JSON.stringify(a.body));
    assert.equal(a.body['status'], 'elected');
    assert.equal(a.body['key'], `election/${name}`);
    assert.match(String(a.body['epoch']), /^[1-9]\d*$/);
    assert.equal(a.body['ttlMs'], 30_000);

    const seen = await call(t.url, 'GET', path);
    const leader = seen.body['leader'] as Record<string, unknown>;
    assert.equal(leader['ownerId'], 'node-a');
    assert.equal(leader['epoch'], a.body['epoch']);
    assert.equal(leader['value'], 'http://10.0.0.1:8080');
    assert.ok(
      !JSON.stringify(seen.body).includes(String(a.body['leaseId'])),
      'observers never see the lease id',
    );

    // Without wait a second campaigner is told busy; with a wait it is parked until the resign.
    const busy = await call(t.url, 'POST', `${path}/campaign`, { body: { ttl: '30s' } });
    assert.equal(busy.status, 409);
    assert.equal(code(busy), 'busy');
    const bPending = call(t.url, 'POST', `${path}/campaign`, {
      body: { ttl: '30s', wait: '60s', ownerId: 'node-b', value: 'http://10.0.0.2:8080' },
    });
    let bSettled = false;
    void bPending.then(() => (bSettled = true));

    // The leader renews through the ordinary lease endpoint with its epoch as token.
    const renewed = await call(t.url, 'POST', '/v1/renew', {
      body: {
        key: `election/${name}`,
        leaseId: a.body['leaseId'],
        token: a.body['epoch'],
        ttl: '30s',
      },
    });
    assert.equal(renewed.status, 200);
    assert.equal(bSettled, false, 'the second campaigner waits while the leader holds');

    const wrong = await call(t.url, 'POST', `${path}/resign`, {
      body: { leaseId: '00000000-0000-4000-8000-000000000000', epoch: a.body['epoch'] },
    });
    assert.equal(wrong.status, 409);
    assert.equal(code(wrong), 'not_owner');
    const resigned = await call(t.url, 'POST', `${path}/resign`, {
      body: { leaseId: a.body['leaseId'], epoch: a.body['epoch'] },
    });
    assert.equal(resigned.status, 200);
    assert.equal(resigned.body['status'], 'resigned');

    const b = await bPending;
    assert.equal(b.status, 200, JSON.stringify(b.body));
    assert.equal(b.body['ownerId'], 'node-b');
    assert.ok(
      BigInt(String(b.body['epoch'])) > BigInt(String(a.body['epoch'])),
      'epochs strictly increase',
    );
    const now = await call(t.url, 'GET', path);
    assert.equal((now.body['leader'] as Record<string, unknown>)['ownerId'], 'node-b');
    assert.equal(now.body['lastEpoch'], b.body['epoch']);

    await eventually('acquired, released, acquired on the event stream', () => {
      const types = frames.map((f) => JSON.parse(f.data) as { type: string; token?: string });
      const acq = types.filter((e) => e.type === 'acquired').map((e) => e.token);
      return acq.includes(String(a.body['epoch'])) &&
        acq.includes(String(b.body['epoch'])) &&
        types.some((e) => e.type === 'released' && e.token === a.body['epoch'])
        ? true
        : undefined;
    });
    ac.abort();
    await reading;
  });

  it('refuses malformed campaign and resign bodies with 400 naming the field', async () => {
    const path = `/v1/elections/${encodeURIComponent(uniqueKey('bad'))}`;
    const noTtl = await call(t.url, 'POST', `${path}/campaign`, { body: {} });
    assert.equal(noTtl.status, 400);
    const numEpoch = await call(t.url, 'POST', `${path}/resign`, {
      body: { leaseId: '00000000-0000-4000-8000-000000000000', epoch: 5 },
    });
    assert.equal(numEpoch.status, 400);
    const badEpoch = await call(t.url, 'POST', `${path}/resign`, {
      body: { leaseId: '00000000-0000-4000-8000-000000000000', epoch: '007' },
    });
    assert.equal(badEpoch.status, 400);
    assert.match((badEpoch.body['error'] as { message: string }).message, /^epoch/);
  });

  it('lists the election routes in the OpenAPI document', async () => {
    const doc = (await (await fetch(`${t.url}/v1/openapi.json`)).json()) as {
      paths: Record<string, unknown>;
    };
    for (const p of [
      '/v1/elections/{name}/campaign',
      '/v1/elections/{name}',
      '/v1/elections/{name}/resign',
    ]) {
      assert.ok(p in doc.paths, p);
    }
  });
});

describe('election endpoints with auth', () => {
  const OPS = 'ops-secret-0123456789abcdef';
  const JOBS = 'jobs-secret-0123456789abcdef';
  let t: TestServer;
  before(async () => {
    t = await startTestServer({
      auth: {
        tokens: [
          { name: 'ops', token: OPS, prefixes: ['election/ops-'] },
          { name: 'jobs', token: JOBS, prefixes: ['jobs/'] },
        ],
      },
    });
  });
  after(() => t.close());

  it('lets a token campaign only under its own election/ prefix and answers 403 elsewhere', async () => {
    const mine = `/v1/elections/${encodeURIComponent(`ops-${uniqueKey('e')}`)}`;
    const ok = await call(t.url, 'POST', `${mine}/campaign`, { token: OPS, body: { ttl: '30s' } });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    const foreign = await call(t.url, 'POST', `${mine}/campaign`, {
      token: JOBS,
      body: { ttl: '30s' },
    });
    assert.equal(foreign.status, 403);
    assert.equal(code(foreign), 'permission_denied');
    const observe = await call(t.url, 'GET', mine, { token: JOBS });
    assert.equal(observe.status, 403);
    const resignForeign = await call(t.url, 'POST', `${mine}/resign`, {
      token: JOBS,
      body: { leaseId: ok.body['leaseId'], epoch: ok.body['epoch'] },
    });
    assert.equal(resignForeign.status, 403);
    const other = await call(
      t.url,
      'POST',
      `/v1/elections/${encodeURIComponent(uniqueKey('x'))}/campaign`,
      {
        token: OPS,
        body: { ttl: '30s' },
      },
    );
    assert.equal(other.status, 403);
    const noToken = await call(t.url, 'GET', mine);
    assert.equal(noToken.status, 401);
    const resigned = await call(t.url, 'POST', `${mine}/resign`, {
      token: OPS,
      body: { leaseId: ok.body['leaseId'], epoch: ok.body['epoch'] },
    });
    assert.equal(resigned.status, 200);
  });
});
