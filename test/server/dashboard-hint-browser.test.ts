import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { killQuietly, spawnCli, type CliProcess } from '../support/cli.js';
import { launchChromium, watchPage, type PageWatch } from '../support/browser.js';
import { startTestServer, type TestServer } from '../support/lease-server.js';

describe('dashboard on a fresh server: how to see something happen (headless Chromium)', () => {
  let t: TestServer;
  let chromium: { browser: BrowserContext; close(): Promise<void> };
  let page: Page;
  let watch: PageWatch;
  const procs: CliProcess[] = [];

  before(async () => {
    t = await startTestServer();
    chromium = await launchChromium({ width: 1000, height: 900 });
    page = await chromium.browser.newPage();
    page.setDefaultTimeout(30_000);
    watch = watchPage(page, new URL(t.url).origin);
    await page.goto(t.url + '/');
    await page.locator('#status', { hasText: 'live' }).waitFor();
  });

  after(async () => {
    for (const p of procs) killQuietly(p);
    await chromium?.close();
    await t?.close();
  });

  /**
   * The row of the live-lease table for `key` (and `token`, when given), as its cells' text.
   * Matched cell by cell: the owner id, lease id and time left hold digits too, so a pattern
   * over the whole row would take the old holder's row for the new token.
   */
  async function leaseRow(key: string, token?: string): Promise<string[]> {
    const exact = (text: string): RegExp =>
      new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}$`);
    let row = page
      .locator('#leases tr')
      .filter({ has: page.locator('td:nth-child(1)', { hasText: exact(key) }) });
    if (token !== undefined) {
      row = row.filter({ has: page.locator('td:nth-child(3)', { hasText: exact(token) }) });
    }
    await row.waitFor();
    return row.locator('td').allTextContents();
  }

  it('shows a one-line command naming this server; run as shown, it makes a lease appear, and a second copy takes over with a higher token', async () => {
    const hint = page.locator('#try-hint');
    await hint.waitFor({ state: 'visible' });
    const command = await page.locator('#try-command').innerText();
    const m = /^npx leasehold (.+)$/.exec(command.trim());
    assert.ok(m !== null, command);
    const args = (m[1] as string).split(' ');
    assert.ok(args.includes(new URL(t.url).origin), `names this server: ${command}`);

    const first = spawnCli(args);
    procs.push(first);
    const [key, , token] = await leaseRow('hello/demo');
    assert.equal(key, 'hello/demo');
    await hint.waitFor({ state: 'hidden' });

    const second = spawnCli(args);
    procs.push(second);
    // The second copy waits (--wait) while the first holds the lease; stopping the first
    // releases it, and the second is granted a higher token.
    await page.locator('#log .acquired', { hasText: 'hello/demo' }).first().waitFor();
    first.child.kill('SIGTERM');
    await first.exited;
    const next = await leaseRow('hello/demo', `${BigInt(token ?? '0') + 1n}`);
    assert.ok(BigInt(next[2] ?? '0') > BigInt(token ?? '0'), `${next[2]} > ${token}`);
    second.child.kill('SIGTERM');
    await second.exited;
    await page.locator('#leases', { hasText: 'no live leases' }).waitFor();
    assert.equal(await hint.isHidden(), true, 'the hint stays away once something happened');
  });

  it('does not show the hint after a reload on a server that has history', async () => {
    await page.reload();
    await page.locator('#status', { hasText: 'live' }).waitFor();
    await page.locator('#history-note', { hasText: 'newest first' }).waitFor();
    await page.locator('#log .acquired').first().waitFor();
    assert.equal(await page.locator('#try-hint').isHidden(), true);
  });

  it('logged no console errors and loaded nothing from another host', () => {
    assert.deepEqual(watch.foreignRequests, []);
    assert.deepEqual(watch.pageErrors, []);
    assert.deepEqual(watch.consoleErrors, []);
  });
});
