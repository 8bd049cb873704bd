import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import type { BrowserContext, Page } from 'playwright-core';
import { LeaseClient } from '../../src/core/client.js';
import { createGateway } from '../../src/fencing/gateway/index.js';
import { SqliteFence } from '../../src/fencing/sqlite.js';
import { createFenceReporter } from '../../src/stores/http/fence-reporter.js';
import { HttpLeaseStore } from '../../src/stores/http/store.js';
import { startUpstream } from '../fencing/gateway/support.js';
import { launchChromium, watchPage, type PageWatch } from '../support/browser.js';
import { startTestServer, type TestServer } from '../support/lease-server.js';
import { tempDir } from '../support/tmp.js';

async function post(url: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  assert.equal(res.status, 200, JSON.stringify(json));
  return json;
}

describe('dashboard in a real browser (headless Chromium)', () => {
  let t: TestServer;
  let chromium: { browser: BrowserContext; close(): Promise<void> };
  let remote: HttpLeaseStore;
  let page: Page;
  let watch: PageWatch;
  const data = tempDir('dashboard-fence');

  before(async () => {
    t = await startTestServer();
    remote = await HttpLeaseStore.connect({ url: t.url });
    chromium = await launchChromium({ width: 1000, height: 900 });
    page = await chromium.browser.newPage();
    page.setDefaultTimeout(30_000);
    watch = watchPage(page, new URL(t.url).origin);
    await page.goto(t.url + '/');
    await page.locator('#status', { hasText: 'live' }).waitFor();
  });

  after(async () => {
    await chromium?.close();
    await remote?.close().catch(() => undefined);
    await t?.close();
    data.remove();
  });

  it('shows a lease acquired through the API live (event stream), then shows it gone after release', async () => {
    await page.locator('#leases', { hasText: 'no live leases' }).waitFor();

    const other = await new LeaseClient({ store: remote, ownerId: 'worker-2' }).acquire(
      'jobs/nightly-report',
      { ttl: '60s', value: 'host-b:9100' },
    );
    const r = await new LeaseClient({ store: remote, ownerId: 'worker-1' }).acquire('jobs/import', {
      ttl: '60s',
      value: 'host-a:8080',
    });
    assert.equal(r.status, 'acquired');
    assert.equal(other.status, 'acquired');
    if (r.status !== 'acquired' || other.status !== 'acquired') return;

    const row = page.locator('#leases tr', { hasText: 'jobs/import' });
    await row.waitFor();
    const cells = await row.locator('td').allTextContents();
    assert.equal(cells[0], 'jobs/import');
    assert.equal(cells[1], 'worker-1');
    assert.equal(cells[2], r.lease.token.toString());
    assert.equal(cells[4], r.lease.leaseId.slice(0, 8));
    assert.equal(cells[5], 'host-a:8080');
    // The event log is fed only by the server-sent event stream (the table also polls).
    await page
      .locator('#log .acquired', {
        hasText: new RegExp(`jobs/import\\s+token ${r.lease.token}\\b`),
      })
      .waitFor();
    await page.locator('#count-acquired', { hasText: /^2$/ }).waitFor();
    await page
      .locator('#tokens tr', { hasText: new RegExp(`jobs/import\\s*${r.lease.token}$`) })
      .waitFor();

    // The remaining time counts down between two list refreshes.
    const remaining = row.locator('td.remaining');
    const first = Number.parseFloat(await remaining.innerText());
    await page.waitForFunction((v) => {
      const doc = (
        globalThis as unknown as {
          document: { querySelector(s: string): { textContent: string } | null };
        }
      ).document;
      const td = doc.querySelector('#leases td.remaining');
      return td !== null && Number.parseFloat(td.textContent) < v;
    }, first);

    await r.lease.release();
    await page.locator('#log .released', { hasText: 'jobs/import' }).waitFor();
    await page.locator('#leases tr', { hasText: 'jobs/import' }).waitFor({ state: 'detached' });
    assert.equal(await page.locator('#leases tr', { hasText: 'jobs/nightly-report' }).count(), 1);
    await other.lease.release();
    await page.locator('#leases', { hasText: 'no live leases' }).waitFor();
  });

  it('a stale write rejected by a fence and reported through createFenceReporter shows highlighted and counted, without a reload', async () => {
    await page.evaluate(() => {
      (globalThis as Record<string, unknown>)['notReloaded'] = true;
    });
    const db = new Database(join(data.dir, 'reports.db'));
    const reporter = createFenceReporter({ url: t.url, resource: 'reports-db' });
    const fence = new SqliteFence({ database: db, onDecision: reporter.onDecision });
    try {
      db.exec('CREATE TABLE report (id TEXT PRIMARY KEY, body TEXT NOT NULL)');
      const put = db.prepare('INSERT OR REPLACE INTO report (id, body) VALUES (?, ?)');
      assert.equal(fence.apply('jobs/report', 34n, () => put.run('july', 'B')).status, 'applied');
      assert.equal(
        fence.apply('jobs/report', 33n, () => put.run('july', 'A')).status,
        'stale_fence',
      );
      await reporter.flush();
      assert.deepEqual(reporter.stats(), { sent: 2, failed: 0, dropped: 0 });
    } finally {
      fence.close();
      db.close();
      await reporter.close();
    }
    const stale = page.locator('#log .stale', { hasText: 'jobs/report' });
    await stale.waitFor();
    assert.match(
      await stale.innerText(),
      /STALE TOKEN REJECTED jobs\/report\s+token 33.*34.*reports-db/,
    );
    await page.locator('#count-stale_fence', { hasText: /^1$/ }).waitFor();
    assert.equal(await page.locator('#count-applied').innerText(), '1');
    assert.match((await page.locator('#stale-counter').getAttribute('class')) ?? '', /alarm/);
    // The highlight is a colour of its own, not the routine events' text colour.
    const colours = await stale.evaluate((el) => {
      const g = globalThis as unknown as {
        getComputedStyle(e: unknown): { backgroundColor: string };
        document: { querySelector(s: string): unknown };
      };
      return [
        g.getComputedStyle(el).backgroundColor,
        g.getComputedStyle(g.document.querySelector('#log .acquired')).backgroundColor,
      ];
    });
    assert.notEqual(colours[0], colours[1]);
    const row = await page
      .locator('#fences tr', { hasText: 'reports-db' })
      .locator('td')
      .allTextContents();
    assert.deepEqual(row, ['reports-db', '1', '0', '1']);
    assert.equal(
      await page.evaluate(() => (globalThis as Record<string, unknown>)['notReloaded']),
      true,
    );
  });

  it('a stale request refused by the fencing gateway shows highlighted and counted, with the gateway as its resource', async () => {
    const upstream = await startUpstream();
    const gw = await createGateway({
      upstream: upstream.url,
      routes: [{ methods: ['PUT'], path: '/reports/:id', scope: 'reports/{id}' }],
      marks: `sqlite:${join(data.dir, 'gateway-marks.db')}`,
      port: 0,
      logLevel: 'silent',
      report: { url: t.url, resource: 'report-api' },
    });
    try {
      const url = await gw.listen();
      const put = (token: string): Promise<Response> =>
        fetch(`${url}/reports/july`, {
          method: 'PUT',
          headers: { 'fencing-token': token },
          body: 'x',
        });
      assert.equal((await put('34')).status, 200);
      const refused = await put('33');
      assert.equal(refused.status, 409);
      assert.equal(
        ((await refused.json()) as { error: { code: string } }).error.code,
        'stale_fence',
      );
      assert.deepEqual(
        upstream.log.map((e) => e.token),
        ['34'],
        'the upstream saw only the newer token',
      );
    } finally {
      await gw.close(); // flushes the gateway's reports
      await upstream.close();
    }
    const stale = page.locator('#log .stale', { hasText: 'reports/july' });
    await stale.waitFor();
    assert.match(
      await stale.innerText(),
      /STALE TOKEN REJECTED reports\/july\s+token 33.*34.*report-api/,
    );
    await page.locator('#count-stale_fence', { hasText: /^2$/ }).waitFor();
    const row = await page
      .locator('#fences tr', { hasText: 'report-api' })
      .locator('td')
      .allTextContents();
    assert.deepEqual(row, ['report-api', '1', '0', '1']);
  });

  it('a claim at acquisition and a refused claim show in the log and the claim counters', async () => {
    const reporter = createFenceReporter({ url: t.url, resource: 'claims-db' });
    const db = new Database(join(data.dir, 'claims.db'));
    const fence = new SqliteFence({ database: db, onDecision: reporter.onDecision });
    const client = new LeaseClient({ store: remote, ownerId: 'worker-3' });
    try {
      const r = await client.acquire('jobs/claimed', { ttl: '60s', fences: [{ fence }] });
      assert.equal(r.status, 'acquired');
      if (r.status !== 'acquired') return;
      const token = r.lease.token;
      assert.equal(fence.claim('jobs/claimed', token + 1n).status, 'applied');
      assert.equal(fence.claim('jobs/claimed', token).status, 'stale_fence');
      await r.lease.release();
      await reporter.flush();
      const applied = page.locator('#log .claim', {
        hasText: new RegExp(`jobs/claimed\\s+token ${token}\\s+applied.*claims-db`),
      });
      await applied.waitFor();
      const refused = page.locator('#log .claim.stale', { hasText: 'CLAIM REFUSED' });
      await refused.waitFor();
      assert.match(
        await refused.innerText(),
        new RegExp(`CLAIM REFUSED jobs/claimed\\s+token ${token}.*${token + 1n}.*claims-db`),
      );
      await page.locator('#count-claim_applied', { hasText: /^2$/ }).waitFor();
      await page.locator('#count-claim_stale', { hasText: /^1$/ }).waitFor();
    } finally {
      await client.close();
      await reporter.close();
      fence.close();
      db.close();
    }
  });

  it('keeps the recent history across a reload (the server keeps the last events)', async () => {
    const before = await page.locator('#log > div').allInnerTexts();
    assert.ok(before.length >= 6, before.join('\n'));
    await page.reload();
    await page.locator('#status', { hasText: 'live' }).waitFor();
    await page.locator('#log .stale', { hasText: 'jobs/report' }).waitFor();
    assert.deepEqual(await page.locator('#log > div').allInnerTexts(), before);
    assert.equal(await page.locator('#count-stale_fence').innerText(), '2');
    assert.equal(await page.locator('#count-acquired').innerText(), '3');
  });

  it('the election view follows a leader change, with the new epoch', async () => {
    const path = `${t.url}/v1/elections/nightly`;
    const a = await post(`${path}/campaign`, { ttl: '60s', ownerId: 'node-a' });
    const row = page.locator('#elections tr[data-election="nightly"]');
    await row.locator('td', { hasText: 'node-a' }).waitFor();
    assert.equal(await row.locator('td').nth(2).innerText(), String(a['epoch']));
    await post(`${path}/resign`, { leaseId: a['leaseId'], epoch: a['epoch'] });
    await row.locator('td', { hasText: 'no leader' }).waitFor();
    const b = await post(`${path}/campaign`, { ttl: '60s', ownerId: 'node-b' });
    assert.ok(BigInt(String(b['epoch'])) > BigInt(String(a['epoch'])));
    await row.locator('td', { hasText: 'node-b' }).waitFor();
    assert.equal(await row.locator('td').nth(2).innerText(), String(b['epoch']));
    await post(`${path}/resign`, { leaseId: b['leaseId'], epoch: b['epoch'] });
  });

  it('watching a prefix clears the log and shows only that prefix', async () => {
    await page.locator('#log .acquired', { hasText: 'election/nightly' }).first().waitFor();
    await page.locator('#prefix').fill('election/');
    await page.locator('#prefix').press('Enter');
    await page.locator('#status', { hasText: 'live' }).waitFor();
    await page.locator('#log .acquired', { hasText: 'election/nightly' }).first().waitFor();
    const lines = await page.locator('#log > div').allInnerTexts();
    assert.ok(lines.length > 0);
    for (const l of lines) assert.match(l, /election\/nightly/);
    assert.equal(await page.locator('#count-stale_fence').innerText(), '0');
  });

  it('loaded nothing from another host and logged no console errors', () => {
    assert.deepEqual(watch.foreignRequests, []);
    assert.deepEqual(watch.pageErrors, []);
    assert.deepEqual(watch.consoleErrors, []);
  });
});
