import { connect } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { StoreAcquireRequest, StoreAcquireResult } from '../../src/core/store.js';
import { SqliteLeaseStore } from '../../src/stores/sqlite/store.js';
import { uniqueKey } from '../support/keys.js';
import { startTestServer, type TestServer } from '../support/lease-server.js';
import { eventually } from '../support/time.js';
import { tempDir } from '../support/tmp.js';

/** The server's SQLite store, whose grants wait at a gate the test opens. */
class GatedStore extends SqliteLeaseStore {
  reached: (() => void) | undefined;
  gate: Promise<void> | undefined;

  override async tryAcquire(request: StoreAcquireRequest): Promise<StoreAcquireResult> {
    if (this.gate !== undefined) {
      this.reached?.();
      await this.gate;
    }
    return super.tryAcquire(request);
  }
}

describe('HTTP API: a client that leaves during an acquisition that does not wait', () => {
  const tmp = tempDir('client-gone');
  const store = new GatedStore({ path: join(tmp.dir, 'leases.db'), groupCommit: true });
  let t: TestServer;
  before(async () => {
    t = await startTestServer({ store });
  });
  after(async () => {
    await t.close();
    tmp.remove();
  });

  it('releases the grant it could no longer deliver: no ghost holder', async () => {
    const key = uniqueKey('gone-nowait');
    let open!: () => void;
    store.gate = new Promise((r) => (open = r));
    const reached = new Promise<void>((r) => (store.reached = r));
    const socket = connect(Number(new URL(t.url).port), '127.0.0.1');
    socket.on('error', () => undefined);
    const body = JSON.stringify({ key, ttl: '60s' });
    socket.write(
      `POST /v1/acquire HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    await reached; // the request is at the store
    socket.destroy();
    const connections = (): Promise<number> =>
      new Promise((resolve, reject) =>
        t.server.app.server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
      );
    await eventually('the server to see the connection close', async () =>
      (await connections()) === 0 ? true : undefined,
    );
    store.gate = undefined;
    open();
    await eventually('the grant to be released', async () => {
      const state = await store.inspect(key);
      return state.lastToken === 1n && state.holder === undefined ? true : undefined;
    });
    // The server no longer counts the abandoned grant as a live lease.
    await eventually('the released grant to leave leasehold_leases_live', async () => {
      const text = await (await fetch(`${t.url}/metrics`)).text();
      return /^leasehold_leases_live\{[^}]*\} 0$/m.test(text) ? true : undefined;
    });
  });
});
