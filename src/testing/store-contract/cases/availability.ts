import assert from 'node:assert/strict';
import { uniqueKey } from '../../kit/wait.js';
import { client, closeAll } from '../helpers.js';
import type { StoreContractCase } from '../harness.js';

/** The store contract: an unreachable store. */
export const availabilityCases: StoreContractCase[] = [
  {
    name: 'answers unavailable, never busy, when the store cannot answer',
    async run(h) {
      const s = await h.open();
      const a = client(s, 'owner-a');
      await s.close();
      const r = await a.acquire(uniqueKey('down'), { ttl: 1000, wait: 200 });
      assert.equal(r.status, 'unavailable');
      await closeAll(a);
    },
  },
];
