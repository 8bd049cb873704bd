// The waiting side of the cross-process handoff benchmark. Talks to the parent over IPC:
// 'wait' → acquire with wait; reports 'parked' once it has been told busy after subscribing;
// on grant reports the machine-monotonic time and releases.
import { LeaseClient } from '../src/core/client.js';
import type { LeaseStore, StoreAcquireRequest, StoreRequestOptions } from '../src/core/store.js';
import { SqliteLeaseStore } from '../src/stores/sqlite/store.js';

const [path, key] = process.argv.slice(2);
if (!path || !key || !process.send) throw new Error('run me with fork(): peer DB KEY');
const send = process.send.bind(process);
const inner = new SqliteLeaseStore({ path });
let busy = 0;
const store: LeaseStore = Object.assign(Object.create(inner) as LeaseStore, {
  tryAcquire: async (r: StoreAcquireRequest, o: StoreRequestOptions) => {
    const answer = await inner.tryAcquire(r, o);
    if (answer.status === 'busy' && ++busy === 2) send({ type: 'parked' });
    return answer;
  },
  watch: (k: string, fn: () => void) => inner.watch(k, fn),
});
const client = new LeaseClient({ store, ownerId: 'peer', pollInterval: 60_000 });
process.on('message', (msg: { type: string }) => {
  if (msg.type === 'stop') {
    void client
      .close()
      .then(() => inner.close())
      .then(() => process.exit(0));
    return;
  }
  busy = 0;
  void client.acquire(key, { ttl: 30_000, wait: 20_000 }).then(async (r) => {
    const at = process.hrtime.bigint();
    if (r.status === 'acquired') await r.lease.release();
    send({ type: 'acquired', status: r.status, at: at.toString() });
  });
});
send({ type: 'ready' });
