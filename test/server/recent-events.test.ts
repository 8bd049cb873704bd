import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Ajv2020 from 'ajv/dist/2020.js';
import { LeaseClient } from '../../src/core/client.js';
import { EventHub, EVENT_HISTORY_SIZE } from '../../src/server/event-hub.js';
import { lessonModules, importSpecifiers } from '../../src/server/lesson-page.js';
import { HttpLeaseStore } from '../../src/stores/http/store.js';
import { uniqueKey } from '../support/keys.js';
import {
  startTestServer,
  TEST_AUTH,
  TEST_TOKENS,
  type TestServer,
} from '../support/lease-server.js';

async function get(
  url: string,
  token?: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(
    url,
    token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } },
  );
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('recent events (the ring buffer behind the dashboard history)', () => {
  it('keeps only the last N published events, oldest first, and filters by prefix or key', () => {
    const hub = new EventHub(() => {}, 3);
    for (let i = 1; i <= 5; i++)
      hub.publish({ type: 'acquired', key: `k/${i % 2}`, token: String(i) });
    assert.deepEqual(
      hub.recent({}).map((e) => e.token),
      ['3', '4', '5'],
    );
    assert.deepEqual(
      hub.recent({ prefix: 'k/1' }).map((e) => e.token),
      ['3', '5'],
    );
    assert.deepEqual(
      hub.recent({ key: 'k/0' }).map((e) => e.token),
      ['4'],
    );
    assert.deepEqual(
      hub.recent({}, 2).map((e) => e.seq),
      [4, 5],
    );
    assert.equal(new EventHub().historySize, EVENT_HISTORY_SIZE);
    assert.deepEqual(new EventHub(() => {}, 0).recent({}), []);
  });

  describe('GET /v1/events/recent', () => {
    let t: TestServer;
    let remote: HttpLeaseStore;

    before(async () => {
      t = await startTestServer({ auth: TEST_AUTH });
      remote = await HttpLeaseStore.connect({ url: t.url, apiToken: TEST_TOKENS.admin });
    });
    after(async () => {
      await remote.close();
      await t.close();
    });

    it('answers the events published before the request, only those the token may read, in the documented shape', async () => {
      const jobKey = `jobs/${uniqueKey('recent')}`;
      const otherKey = `other/${uniqueKey('recent')}`;
      const client = new LeaseClient({ store: remote, ownerId: 'w1' });
      for (const key of [jobKey, otherKey]) {
        const r = await client.acquire(key, { ttl: '30s' });
        assert.equal(r.status, 'acquired');
        if (r.status === 'acquired') await r.lease.release();
      }
      await client.close();

      const all = await get(`${t.url}/v1/events/recent`, TEST_TOKENS.admin);
      assert.equal(all.status, 200, JSON.stringify(all.body));
      const events = all.body['events'] as { type: string; key: string; seq: number }[];
      assert.deepEqual(
        events.filter((e) => e.key === jobKey).map((e) => e.type),
        ['acquired', 'released'],
      );
      const seqs = events.map((e) => e.seq);
      assert.deepEqual(
        seqs,
        [...seqs].sort((a, b) => a - b),
        'oldest first',
      );
      assert.equal(all.body['historySize'], EVENT_HISTORY_SIZE);

      const jobsOnly = await get(`${t.url}/v1/events/recent?limit=1`, TEST_TOKENS.jobs);
      assert.equal(jobsOnly.status, 200);
      const only = jobsOnly.body['events'] as { key: string; type: string }[];
      assert.deepEqual(
        only.map((e) => [e.key, e.type]),
        [[jobKey, 'released']],
      );

      const byKey = await get(
        `${t.url}/v1/events/recent?key=${encodeURIComponent(otherKey)}`,
        TEST_TOKENS.reader,
      );
      assert.equal((byKey.body['events'] as unknown[]).length, 2);

      // The answer matches the OpenAPI document's schema.
      const doc = (await get(`${t.url}/v1/openapi.json`)).body as {
        paths: Record<
          string,
          { get: { responses: Record<string, { content: Record<string, { schema: object }> }> } }
        >;
      };
      const schema =
        doc.paths['/v1/events/recent']?.get.responses['200']?.content['application/json']?.schema;
      assert.ok(schema !== undefined);
      const validate = new Ajv2020.default({ strict: false }).compile(schema);
      assert.ok(validate(all.body), JSON.stringify(validate.errors));
    });

    it('refuses bad queries and keys the token may not read with 4xx {error}', async () => {
      const bad = await get(`${t.url}/v1/events/recent?limit=0`, TEST_TOKENS.admin);
      assert.equal(bad.status, 400);
      assert.equal((bad.body['error'] as { code: string }).code, 'invalid_argument');
      const huge = await get(`${t.url}/v1/events/recent?limit=501`, TEST_TOKENS.admin);
      assert.equal(huge.status, 400);
      const denied = await get(`${t.url}/v1/events/recent?key=other/x`, TEST_TOKENS.jobs);
      assert.equal(denied.status, 403);
      const anonymous = await get(`${t.url}/v1/events/recent`);
      assert.equal(anonymous.status, 401);
    });
  });
});

describe('the lesson page modules', () => {
  it('are the simulation and what it imports, all relative: no Node built-in, no package', () => {
    const modules = lessonModules(new URL('../../src/', import.meta.url));
    assert.ok(modules.has('sim/lesson.js') && modules.has('core/client.js'));
    for (const [path, source] of modules) {
      for (const spec of importSpecifiers(source))
        assert.match(spec, /^\.\.?\//, `${path}: ${spec}`);
      assert.doesNotMatch(source, /sourceMappingURL/);
    }
    assert.ok(!modules.has('server/server.js'));
  });

  it('finds static imports and re-exports in compiled code', () => {
    assert.deepEqual(
      importSpecifiers(
        "import { a } from './a.js';\nimport './side.js';\nexport { b } from \"../b.js\";\nexport * from './c.js';\nconst x = 'from';",
      ),
      ['./a.js', './side.js', '../b.js', './c.js'],
    );
  });

  it('serves only those modules: anything else under /lesson/js is 404 {error}', async () => {
    const t = await startTestServer();
    try {
      const ok = await fetch(`${t.url}/lesson/js/sim/lesson.js`);
      assert.equal(ok.status, 200);
      assert.match(ok.headers.get('content-type') ?? '', /^text\/javascript/);
      await ok.text();
      for (const path of [
        'server/server.js',
        'stores/sqlite/store.js',
        '..%2Fpackage.json',
        'sim/nope.js',
      ]) {
        const res = await fetch(`${t.url}/lesson/js/${path}`);
        assert.equal(res.status, 404, path);
        assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'not_found');
      }
      const page = await fetch(`${t.url}/lesson`);
      assert.equal(page.status, 200);
      assert.match(await page.text(), /from '\/lesson\/js\/sim\/lesson\.js'/);
    } finally {
      await t.close();
    }
  });
});
