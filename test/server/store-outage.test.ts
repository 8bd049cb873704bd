import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { LeaseClient } from '../../src/core/client.js';
import { HttpLeaseStore } from '../../src/stores/http/store.js';
import { PostgresLeaseStore } from '../../src/stores/postgres/store.js';
import { uniqueKey } from '../support/keys.js';
import { startTestServer, type TestServer } from '../support/lease-server.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../support/throwaway-postgres.js';
import { eventually } from '../support/time.js';

async function status(url: string): Promise<number> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(10_000) })).status;
  } catch {
    return -1;
  }
}

describe('store outage: a server over PostgreSQL while the database is down', () => {
  let pg: ThrowawayPostgres | undefined;
  let server: TestServer | undefined;
  let remote: HttpLeaseStore | undefined;

  before(async () => {
    pg = await startThrowawayPostgres();
    const store = new PostgresLeaseStore({ connectionString: pg.url, maxConnections: 4 });
    await store.migrate();
    server = await startTestServer({ store });
    remote = await HttpLeaseStore.connect({ url: server.url });
  });

  after(async () => {
    await remote?.close().catch(() => undefined);
    await server?.close().catch(() => undefined);
    pg?.destroy();
  });

  it('answers 503 unavailable and fails /readyz while the database is down, ends the held lease by its local deadline, and resumes with higher tokens after restart', async (t) => {
    const client = new LeaseClient({ store: remote! });
    const key = uniqueKey('outage');
    const first = await client.acquire(key, { ttl: '3s' });
    assert.equal(first.status, 'acquired');
    if (first.status !== 'acquired') return;
    const lease = first.lease;
    assert.equal(await status(`${server!.url}/readyz`), 200);

    pg!.crash();
    const crashedAt = performance.now();
    const localDeadline = lease.deadline;

    // Clients are told "unavailable", never a grant or a wrong "busy".
    const raw = await fetch(`${server!.url}/v1/acquire`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ key: uniqueKey('outage-other'), ttl: '5s' }),
    });
    assert.equal(raw.status, 503);
    assert.equal(((await raw.json()) as { error: { code: string } }).error.code, 'unavailable');
    const viaLib = await client.acquire(uniqueKey('outage-lib'), { ttl: '5s' });
    assert.equal(viaLib.status, 'unavailable');
    await eventually('/readyz to fail', async () =>
      (await status(`${server!.url}/readyz`)) === 503 ? true : undefined,
    );

    // The holder cannot renew: its signal fires by its local deadline (not later). The deadline
    // is read while polling, since a renewal in flight at the crash may still have moved it.
    let lastDeadline = localDeadline;
    await eventually(
      'the held lease to be lost',
      () => {
        if (lease.signal.aborted) return true;
        lastDeadline = lease.deadline;
        return undefined;
      },
      { timeoutMs: 30_000, intervalMs: 10 },
    );
    const lostAt = performance.now();
    assert.equal(lease.status, 'lost');
    assert.ok(lostAt > crashedAt);
    // The signal is armed for the local deadline; allow for a loaded machine's timer lag.
    assert.ok(
      lostAt <= lastDeadline + 2_000,
      `lost ${Math.round(lostAt - lastDeadline)}ms after the deadline`,
    );

    t.diagnostic(
      `lease lost ${Math.round(lostAt - crashedAt)}ms after the crash, ${Math.round(lostAt - lastDeadline)}ms after its local deadline`,
    );
    const restartAt = performance.now();
    pg!.start();
    await eventually(
      '/readyz to succeed again',
      async () => ((await status(`${server!.url}/readyz`)) === 200 ? true : undefined),
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    const again = await eventually(
      'an acquire to succeed after restart',
      async () => {
        const r = await client.acquire(key, { ttl: '5s', wait: '10s' });
        return r.status === 'acquired' ? r : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    t.diagnostic(
      `service resumed ${Math.round(performance.now() - restartAt)}ms after the restart began`,
    );
    assert.ok(again.lease.token > lease.token, 'tokens still increase across the outage');
    await again.lease.release();
  });
});
