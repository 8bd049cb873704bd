import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createGateway } from '../../src/fencing/gateway/index.js';
import { PostgresMarkStore } from '../../src/fencing/marks/postgres.js';
import { Gate } from '../support/gate.js';
import { dropSchema, PG_URL, uniqueSchema, withPgClient } from '../support/postgres.js';
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
});
