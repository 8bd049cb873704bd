import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { tempDir } from './tmp.js';

/** Debian's Chromium, headless, with a fresh profile; `close()` removes the profile. */
export async function launchChromium(
  viewport: { width: number; height: number } = { width: 1000, height: 700 },
): Promise<{ browser: BrowserContext; close(): Promise<void> }> {
  const profile = tempDir('chromium');
  // launchPersistentContext passes the directory as --user-data-dir.
  const browser = await chromium.launchPersistentContext(join(profile.dir, 'profile'), {
    executablePath: '/usr/bin/chromium',
    headless: true,
    timeout: 60_000,
    viewport,
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
  return {
    browser,
    async close() {
      await browser.close().catch(() => undefined);
      profile.remove();
    },
  };
}

/** What a page did that a test must see: console errors, uncaught errors, foreign requests. */
export interface PageWatch {
  readonly consoleErrors: string[];
  readonly pageErrors: string[];
  /** Requests to any origin but `origin` (data: URLs do not count: nothing leaves the page). */
  readonly foreignRequests: string[];
  readonly requests: string[];
}

/** Records console errors, page errors and every request of `page` not to `origin`. */
export function watchPage(page: Page, origin: string): PageWatch {
  const w: PageWatch = { consoleErrors: [], pageErrors: [], foreignRequests: [], requests: [] };
  page.on('console', (m) => {
    if (m.type() === 'error') w.consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => w.pageErrors.push(String(e)));
  page.on('request', (r) => {
    const url = r.url();
    w.requests.push(url);
    if (url.startsWith('data:')) return;
    if (new URL(url).origin !== origin) w.foreignRequests.push(url);
  });
  return w;
}
