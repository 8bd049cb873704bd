import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { chromium, type BrowserContext } from 'playwright-core';
import { LeaseClient } from '../../src/core/client.js';
import { HttpLeaseStore } from '../../src/stores/http/store.js';
import { startTestServer, type TestServer } from '../support/lease-server.js';
import { tempDir } from '../support/tmp.js';

/**
 * The screenshot in the docs (the source tree, not build/). Rewritten only with
 * LEASEHOLD_UPDATE_SCREENSHOT=1, so ordinary test runs leave the working tree clean.
 */
const SCREENSHOT = fileURLToPath(new URL('../../../docs/img/dashboard.png', import.meta.url));

describe('dashboard in a real browser (headless Chromium)', () => {
  let t: TestServer;
  let browser: BrowserContext;
  let remote: HttpLeaseStore;
  const profile = tempDir('chromium');

  before(async () => {
    t = await startTestServer();
    remote = await HttpLeaseStore.connect({ url: t.url });
    // A fresh profile per run (launchPersistentContext passes it as --user-data-dir).
    browser = await chromium.launchPersistentContext(join(profile.dir, 'profile'), {
      executablePath: '/usr/bin/chromium',
      headless: true,
      timeout: 60_000,
      viewport: { width: 1000, height: 340 },
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    await remote?.close().catch(() => undefined);
    await t?.close();
    profile.remove();
  });

  it('shows a lease acquired through the API live (event stream), then shows it gone after release', async () => {
    const page = await browser.newPage();
    page.setDefaultTimeout(30_000);
    await page.goto(t.url + '/');
    await page.locator('#status', { hasText: 'live' }).waitFor();
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

    const shot = await page.screenshot();
    assert.ok(shot.length > 1000, 'a real screenshot');
    if (process.env['LEASEHOLD_UPDATE_SCREENSHOT'] === '1') {
      mkdirSync(join(SCREENSHOT, '..'), { recursive: true });
      writeFileSync(SCREENSHOT, shot);
    }

    await r.lease.release();
    await page.locator('#log .released', { hasText: 'jobs/import' }).waitFor();
    await page.locator('#leases tr', { hasText: 'jobs/import' }).waitFor({ state: 'detached' });
    assert.equal(await page.locator('#leases tr', { hasText: 'jobs/nightly-report' }).count(), 1);
    await other.lease.release();
    await page.locator('#leases', { hasText: 'no live leases' }).waitFor();
    await page.close();
  });
});
