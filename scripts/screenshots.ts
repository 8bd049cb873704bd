// Takes the screenshots in docs/img/ of the dashboard and the lesson page, on a server with a
// little activity (leases, an election, fence decisions including a stale rejection).
// Run: npm run build:test && node build/scripts/screenshots.js
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { LeaseClient } from '../src/core/client.js';
import { createLeaseServer } from '../src/server/server.js';
import { createFenceReporter } from '../src/stores/http/fence-reporter.js';
import { HttpLeaseStore } from '../src/stores/http/store.js';
import { MemoryLeaseStore } from '../src/stores/memory/store.js';
import { launchChromium } from '../test/support/browser.js';

const IMG = fileURLToPath(new URL('../../docs/img/', import.meta.url));

async function post(url: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, unknown>;
}

async function main(): Promise<void> {
  const store = new MemoryLeaseStore();
  const server = createLeaseServer({ store, port: 0, logLevel: 'silent', processMetrics: false });
  const url = await server.listen();
  const remote = await HttpLeaseStore.connect({ url });
  const chromium = await launchChromium({ width: 1100, height: 900 });
  try {
    const page = await chromium.browser.newPage();
    await page.goto(`${url}/`);
    await page.locator('#status', { hasText: 'live' }).waitFor();

    const a = new LeaseClient({ store: remote, ownerId: 'worker-a' });
    const b = new LeaseClient({ store: remote, ownerId: 'worker-b' });
    const first = await a.acquire('jobs/nightly-report', { ttl: '10s', autoRenew: false });
    if (first.status !== 'acquired') throw new Error('could not acquire');
    await first.lease.release();
    const report = await b.acquire('jobs/nightly-report', { ttl: '60s', value: 'host-b:9100' });
    const imports = await a.acquire('jobs/import', { ttl: '45s', value: 'host-a:8080' });
    if (report.status !== 'acquired' || imports.status !== 'acquired')
      throw new Error('could not acquire');
    await post(`${url}/v1/elections/scheduler/campaign`, { ttl: '30s', ownerId: 'node-1' });

    const reporter = createFenceReporter({ url, resource: 'reports-db' });
    const key = 'jobs/nightly-report';
    reporter.onDecision({ scope: key, token: report.lease.token, status: 'applied' });
    reporter.onDecision({
      scope: key,
      token: report.lease.token - 1n,
      status: 'stale_fence',
      highWaterMark: report.lease.token,
    });
    await reporter.close();
    await page.locator('#log .stale').waitFor();
    await page.locator('#elections td', { hasText: 'node-1' }).waitFor();

    mkdirSync(IMG, { recursive: true });
    writeFileSync(`${IMG}dashboard.png`, await page.screenshot({ fullPage: true }));

    await page.setViewportSize({ width: 1000, height: 900 });
    await page.goto(`${url}/lesson`);
    await page.locator('#lesson[data-state="ready"]').waitFor();
    writeFileSync(`${IMG}lesson.png`, await page.screenshot({ fullPage: true }));
    await report.lease.release();
    await imports.lease.release();
    await a.close();
    await b.close();
  } finally {
    await chromium.close();
    await remote.close();
    await server.close();
    await store.close();
  }
}

await main();
