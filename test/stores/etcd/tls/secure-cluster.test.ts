import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { LeaseClient } from '../../../../src/core/client.js';
import { EtcdLeaseStore } from '../../../../src/stores/etcd/store.js';
import { openStore, parseEtcdStoreUrl } from '../../../../src/stores/open-store.js';
import { storeContractCases as contractCases } from '../../../../src/testing/store-contract/index.js';
import type { StoreHarness } from '../../../contract/harness.js';
import { spawnCli } from '../../../support/cli.js';
import { etcdctl } from '../../../support/etcdctl.js';
import {
  ETCD_APP_PREFIX,
  ETCD_USERS,
  startSecureEtcd,
  type SecureEtcd,
} from '../../../support/etcd-tls.js';
import { uniqueKey } from '../../../support/keys.js';
import { checkUrlStoreAndEpoch } from '../../../support/url-store-epoch.js';

// A 3-member etcd cluster with client TLS (mutual: client certificates required) and RBAC,
// the way a production cluster is locked down; the store connects as a user whose role may
// touch only keys under `locks/`.
let etcd: SecureEtcd;
before(async () => {
  etcd = await startSecureEtcd({ size: 3 });
});
after(async () => {
  await etcd?.stop();
});

/** The `app` user's etcds:// URL: its password, the CA, a client certificate, its prefix. */
function appUrl(): string {
  const hosts = etcd.endpoints.map((e) => e.replace('https://', '')).join(',');
  const query = new URLSearchParams({
    namespace: ETCD_APP_PREFIX,
    ca: etcd.ca.certPath,
    cert: etcd.client.certPath,
    key: etcd.client.keyPath,
  });
  return `etcds://app:${encodeURIComponent(ETCD_USERS.app)}@${hosts}?${query.toString()}`;
}

function storeAs(username: string, password: string, extra: { clientCert?: boolean } = {}) {
  return new EtcdLeaseStore({
    hosts: etcd.endpoints,
    namespace: ETCD_APP_PREFIX,
    minTtlMs: 1000,
    clientOptions: {
      credentials: {
        rootCertificate: etcd.ca.cert,
        ...(extra.clientCert === false
          ? {}
          : { privateKey: etcd.client.key, certChain: etcd.client.cert }),
      },
      auth: { username, password },
    },
  });
}

describe('LeaseStore contract: etcd, 3 members, client TLS and RBAC (user limited to locks/)', () => {
  const harness: StoreHarness = {
    name: 'etcd-tls-rbac',
    open: () => Promise.resolve(storeAs('app', ETCD_USERS.app)),
    teardown: () => Promise.resolve(),
  };
  for (const c of contractCases) {
    it(c.name, { timeout: c.timeoutMs ?? 30_000 }, (t) => c.run(harness, t));
  }
});

describe('etcd with TLS and RBAC: credentials and permissions', () => {
  it('writes nothing outside its namespace: every key the store made is under the role prefix', async () => {
    const store = storeAs('app', ETCD_USERS.app);
    const client = new LeaseClient({ store, ownerId: 'app' });
    try {
      const r = await client.acquire(uniqueKey('tls-layout'), { ttl: '5s' });
      assert.equal(r.status, 'acquired');
      const ctl = etcdctl(etcd.endpoints, [
        ...etcd.ctlFlags('root'),
        'get',
        '',
        '--prefix',
        '--keys-only',
      ]);
      assert.equal(await ctl.exited, 0, ctl.out);
      const keys = ctl.out.split('\n').filter((k) => k.trim() !== '');
      assert.ok(keys.length > 0, 'root sees the keys the store wrote');
      for (const k of keys)
        assert.ok(k.startsWith(ETCD_APP_PREFIX), `key outside the prefix: ${k}`);
      if (r.status === 'acquired') await r.lease.release();
    } finally {
      await client.close();
      await store.close();
    }
  });

  it('a user without permission on the prefix gets unavailable naming the permission, never busy', async () => {
    const store = storeAs('outsider', ETCD_USERS.outsider);
    const client = new LeaseClient({ store, ownerId: 'outsider', requestTimeout: '3s' });
    try {
      for (const wait of [undefined, '1s'] as const) {
        const r = await client.acquire(uniqueKey('tls-denied'), {
          ttl: '5s',
          ...(wait === undefined ? {} : { wait }),
        });
        assert.equal(r.status, 'unavailable');
        if (r.status === 'unavailable') assert.match(String(r.cause), /permission denied/i);
      }
    } finally {
      await client.close();
      await store.close();
    }
  });

  it('a wrong password gets unavailable saying authentication failed', async () => {
    const store = storeAs('app', 'not-the-password');
    const client = new LeaseClient({ store, ownerId: 'intruder', requestTimeout: '3s' });
    try {
      const r = await client.acquire(uniqueKey('tls-badpw'), { ttl: '5s' });
      assert.equal(r.status, 'unavailable');
      if (r.status === 'unavailable') assert.match(String(r.cause), /authentication failed/i);
    } finally {
      await client.close();
      await store.close();
    }
  });

  it('without a client certificate the TLS handshake is refused: unavailable', async () => {
    const store = storeAs('app', ETCD_USERS.app, { clientCert: false });
    const client = new LeaseClient({ store, ownerId: 'no-cert', requestTimeout: '3s' });
    try {
      const r = await client.acquire(uniqueKey('tls-nocert'), { ttl: '5s' });
      assert.equal(r.status, 'unavailable');
    } finally {
      await client.close();
      await store.close();
    }
  });

  it('opens from an etcds:// URL with the user, the CA and a client certificate', async () => {
    const url = appUrl();
    const store = await openStore(url);
    const client = new LeaseClient({ store, ownerId: 'from-url' });
    try {
      const key = uniqueKey('tls-url');
      const r = await client.acquire(key, { ttl: '5s' });
      assert.equal(r.status, 'acquired');
      if (r.status === 'acquired') await r.lease.release();
      // The same URL with a wrong password: unavailable, authentication failed.
      const bad = await openStore(url.replace(encodeURIComponent(ETCD_USERS.app), 'nope'));
      const other = new LeaseClient({ store: bad, ownerId: 'bad-url', requestTimeout: '3s' });
      const denied = await other.acquire(key, { ttl: '5s' });
      assert.equal(denied.status, 'unavailable');
      if (denied.status === 'unavailable')
        assert.match(String(denied.cause), /authentication failed/);
      await other.close();
      await bad.close();
    } finally {
      await client.close();
      await store.close();
    }
  });

  it('leasehold epoch on an etcds:// URL connects with its user and client certificate; later tokens exceed the floor', async () => {
    const url = appUrl();
    await checkUrlStoreAndEpoch(url, 'tls');
    // The same URL with a wrong password: the command names the failure and exits 69.
    const bad = spawnCli([
      'epoch',
      '--store',
      url.replace(encodeURIComponent(ETCD_USERS.app), 'nope'),
    ]);
    assert.equal(await bad.exited, 69);
    assert.match(bad.stderr(), /authentication failed/i);
    assert.doesNotMatch(bad.stderr(), new RegExp(ETCD_USERS.app.replace(/\W/g, '.')));
  });

  it('parses etcds:// URLs and refuses malformed ones naming the rule', () => {
    assert.deepEqual(
      parseEtcdStoreUrl('etcds://u:p%40ss@a:2379,b:2379?ca=/ca.pem&namespace=locks/'),
      {
        hosts: ['https://a:2379', 'https://b:2379'],
        namespace: 'locks/',
        tls: { ca: '/ca.pem' },
        auth: { username: 'u', password: 'p@ss' },
      },
    );
    assert.deepEqual(parseEtcdStoreUrl('etcd://u:p@a:2379'), {
      hosts: ['http://a:2379'],
      auth: { username: 'u', password: 'p' },
    });
    assert.throws(() => parseEtcdStoreUrl('etcd://a:2379?ca=/ca.pem'), /need an etcds:\/\/ URL/);
    assert.throws(
      () => parseEtcdStoreUrl('etcds://a:2379?cert=/c.pem'),
      /cert and key must be given together/,
    );
    assert.throws(
      () => parseEtcdStoreUrl('etcds://a:2379?cacert=/c.pem'),
      /"cacert" is not one of/,
    );
    // The password never appears in the error.
    assert.throws(
      () => parseEtcdStoreUrl('etcds://u:secret@a'),
      (err: Error) => !err.message.includes('secret'),
    );
  });
});
