import assert from 'node:assert/strict';
import { LeaseClient } from '../../src/core/client.js';
import { openStore } from '../../src/stores/open-store.js';
import { spawnCli } from './cli.js';
import { uniqueKey } from './keys.js';

/**
 * What a store URL must do end to end: `openStore(url)` holds a lease; `leasehold epoch
 * --store url` exits 0 with a floor above that lease's token; the next grant's token is above
 * the floor. Returns the floor.
 */
export async function checkUrlStoreAndEpoch(url: string, label: string): Promise<bigint> {
  const store = await openStore(url);
  const client = new LeaseClient({ store, ownerId: `${label}-url` });
  try {
    const key = uniqueKey(`${label}-epoch`);
    const before = await client.acquire(key, { ttl: '5s' });
    assert.equal(before.status, 'acquired');
    if (before.status !== 'acquired') throw new Error('unreachable');
    await before.lease.release();
    const cli = spawnCli(['epoch', '--store', url, '--json']);
    assert.equal(await cli.exited, 0, cli.stderr());
    const floor = BigInt((JSON.parse(cli.stdout()) as { floor: string }).floor);
    assert.ok(floor > before.lease.token, `floor ${floor} above the earlier token`);
    const after = await client.acquire(key, { ttl: '5s' });
    assert.equal(after.status, 'acquired');
    if (after.status === 'acquired') {
      assert.ok(after.lease.token > floor, `token ${after.lease.token} above floor ${floor}`);
      await after.lease.release();
    }
    return floor;
  } finally {
    await client.close();
    await store.close();
  }
}
