import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createGateway } from '../../../src/fencing/gateway/index.js';
import { PostgresMarkStore } from '../../../src/fencing/marks/postgres.js';
import { Gate } from '../../support/gate.js';
import { TcpProxy } from '../../support/tcp-proxy.js';
import { dropSchema, PG_URL, uniqueSchema, withPgClient } from '../../support/postgres.js';
import { startUpstream } from './support.js';

describe('gateway scope-lock (PostgreSQL)', () => {
  it(
    'a forward whose scope hold loses its session is aborted at once, not at the upstream timeout',
    { timeout: 90_000 },
    async () => {
      const schema = uniqueSchema('gwlock');
      const marks = new PostgresMarkStore({ connectionString: PG_URL, schema });
      await marks.migrate();
      const up = await startUpstream();
      const gate = new Gate();
      up.onRequest = () => gate.wait();
      const gw = await createGateway({
        upstream: up.url,
        routes: [{ methods: ['PUT'], path: '/r/:id', scope: 'r/{id}' }],
        marks,
        replicas: 'scope-lock',
        port: 0,
        logLevel: 'silent',
        upstreamTimeoutMs: 60_000,
      });
      try {
        const url = await gw.listen();
        const started = performance.now();
        const answer = fetch(`${url}/r/1`, {
          method: 'PUT',
          headers: { 'fencing-token': '5' },
          body: 'x',
        });
        await gate.reached;
        // The hold is a session advisory lock of this process's hold pool.
        const killed = await withPgClient(
          async (c) =>
            (
              await c.query(
                `SELECT pg_terminate_backend(a.pid) AS ok FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
             WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = $1`,
                [`leasehold-gateway-hold-${process.pid}`],
              )
            ).rowCount,
        );
        assert.equal(killed, 1, 'exactly one hold session');
        const r = await answer;
        assert.equal(r.status, 502);
        assert.equal(((await r.json()) as { error: { code: string } }).error.code, 'bad_gateway');
        assert.ok(performance.now() - started < 60_000, 'aborted before the upstream timeout');
        // The scope is free again: a newer token goes through on a fresh hold.
        gate.open();
        const next = await fetch(`${url}/r/1`, {
          method: 'PUT',
          headers: { 'fencing-token': '6' },
          body: 'y',
        });
        assert.equal(next.status, 200);
      } finally {
        gate.open();
        await gw.close();
        await up.close();
        await marks.close();
        await dropSchema(schema);
      }
    },
  );

  for (const replicas of ['scope-lock', 'single'] as const) {
    it(
      `two gateways on one PostgreSQL mark store, ${replicas}: ${replicas === 'single' ? 'control — the upstream sees 41 after 42' : 'the upstream sees 41 before 42'}`,
      { timeout: 90_000 },
      async () => {
        const schema = uniqueSchema('gwrep2');
        const marksX = new PostgresMarkStore({ connectionString: PG_URL, schema });
        const marksY = new PostgresMarkStore({ connectionString: PG_URL, schema });
        await marksX.migrate();
        const up = await startUpstream();
        // X's forwards go through a proxy the test holds; Y talks to the upstream directly.
        const proxy = await TcpProxy.start({
          host: '127.0.0.1',
          port: Number(new URL(up.url).port),
        });
        const routes = [{ methods: ['PUT'], path: '/r/:id', scope: 'r/{id}' }];
        const common = {
          routes,
          replicas,
          port: 0,
          logLevel: 'silent' as const,
          upstreamTimeoutMs: 60_000,
        };
        const x = await createGateway({
          ...common,
          upstream: `http://127.0.0.1:${proxy.port}`,
          marks: marksX,
        });
        const y = await createGateway({ ...common, upstream: up.url, marks: marksY });
        try {
          const [xUrl, yUrl] = [await x.listen(), await y.listen()];
          proxy.hold('up');
          const a = fetch(`${xUrl}/r/1`, {
            method: 'PUT',
            headers: { 'fencing-token': '41' },
            body: '41',
          });
          const end = Date.now() + 10_000;
          while (proxy.heldBytes('up') === 0) {
            assert.ok(Date.now() < end, 'X never forwarded');
            await new Promise((r) => setTimeout(r, 5));
          }
          const b = fetch(`${yUrl}/r/1`, {
            method: 'PUT',
            headers: { 'fencing-token': '42' },
            body: '42',
          });
          if (replicas === 'single') {
            // Nothing holds Y back: 42 lands while 41 is still in the network.
            assert.equal((await b).status, 200);
            proxy.release('up');
            assert.equal((await a).status, 200);
            assert.deepEqual(
              up.log.map((e) => e.body),
              ['42', '41'],
              'the anomaly scope-lock exists for',
            );
          } else {
            // Y waits for X's hold on the scope (its lock is taken before its check).
            const waiting = await withPgClient(async (c) => {
              const deadline = Date.now() + 10_000;
              for (;;) {
                const r = await c.query(
                  `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                 WHERE l.locktype = 'advisory' AND NOT l.granted AND a.application_name = $1`,
                  [`leasehold-gateway-hold-${process.pid}`],
                );
                if ((r.rows[0] as { n: number }).n === 1) return true;
                if (Date.now() > deadline) return false;
                await new Promise((res) => setTimeout(res, 10));
              }
            });
            assert.ok(waiting, "Y's forward waits on the scope's lock");
            assert.equal(up.count(), 0);
            proxy.release('up');
            assert.equal((await a).status, 200);
            assert.equal((await b).status, 200);
            assert.deepEqual(
              up.log.map((e) => e.body),
              ['41', '42'],
            );
          }
        } finally {
          proxy.release('up');
          await x.close();
          await y.close();
          await proxy.close();
          await up.close();
          await marksX.close();
          await marksY.close();
          await dropSchema(schema);
        }
      },
    );
  }
});
