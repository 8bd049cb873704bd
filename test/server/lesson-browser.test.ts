import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import {
  LESSON_PRESETS,
  runLessonStory,
  summarizeLesson,
  type LessonFault,
  type LessonSummary,
} from '../../src/sim/lesson.js';
import { launchChromium, watchPage, type PageWatch } from '../support/browser.js';
import { startTestServer, type TestServer } from '../support/lease-server.js';

const CLI = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));
const run = promisify(execFile);

interface Settings {
  pauseS?: number;
  freezeAtS?: number;
  ttlS?: number;
  renewS?: number;
  fault?: LessonFault;
  fencing?: boolean;
  bWorkS?: number;
  claim?: boolean;
}

interface PageStory {
  readonly parameters: LessonSummary['parameters'];
  readonly outcome: string;
  readonly headline: string;
  readonly verdict: string;
  readonly timeline: LessonSummary['timeline'];
  readonly marks: string[];
}

/** The little of the DOM these tests read (the project compiles without the DOM library). */
interface El {
  readonly dataset: Record<string, string | undefined>;
  readonly textContent: string | null;
  querySelector(selector: string): El | null;
}
interface Doc {
  getElementById(id: string): El | null;
  querySelectorAll(selector: string): Iterable<El>;
  readonly documentElement: { readonly scrollWidth: number };
}

/** The run counter the page bumps after each story it draws. */
async function runCount(page: Page): Promise<number> {
  return Number(await page.locator('#lesson').getAttribute('data-run'));
}

async function waitForRunAfter(page: Page, previous: number): Promise<void> {
  await page.waitForFunction((n) => {
    const main = (globalThis as unknown as { document: Doc }).document.getElementById('lesson');
    return main !== null && main.dataset['state'] === 'ready' && Number(main.dataset['run']) > n;
  }, previous);
}

/** Sets the controls as a reader would (fill on a range input fires `input`), then waits. */
async function set(page: Page, s: Settings): Promise<void> {
  const fields: [string, number | undefined][] = [
    ['#pause', s.pauseS],
    ['#freeze-at', s.freezeAtS],
    ['#ttl', s.ttlS],
    ['#renew', s.renewS],
    ['#b-work', s.bWorkS],
  ];
  for (const [sel, v] of fields) {
    if (v === undefined) continue;
    const before = await runCount(page);
    await page.locator(sel).fill(String(v));
    await waitForRunAfter(page, before);
  }
  if (s.fault !== undefined) {
    const before = await runCount(page);
    await page.locator('#fault').selectOption(s.fault);
    await waitForRunAfter(page, before);
  }
  if (s.fencing !== undefined && (await page.locator('#fencing').isChecked()) !== s.fencing) {
    const before = await runCount(page);
    await page.locator('#fencing').setChecked(s.fencing);
    await waitForRunAfter(page, before);
  }
  if (s.claim !== undefined && (await page.locator('#claim').isChecked()) !== s.claim) {
    const before = await runCount(page);
    await page.locator('#claim').setChecked(s.claim);
    await waitForRunAfter(page, before);
  }
}

/** What the page shows, read back from its DOM. */
async function read(page: Page): Promise<PageStory> {
  return page.evaluate(() => {
    const document = (globalThis as unknown as { document: Doc }).document;
    const main = document.getElementById('lesson') as El;
    const items = Array.from(document.querySelectorAll('#timeline li'));
    return {
      parameters: JSON.parse(main.dataset['parameters'] ?? '{}') as PageStory['parameters'],
      outcome: document.getElementById('verdict')?.dataset['outcome'] ?? '',
      headline: document.getElementById('headline')?.textContent ?? '',
      verdict: document.getElementById('explanation')?.textContent ?? '',
      timeline: items.map((li) => {
        const d = li.dataset;
        return {
          t: Number(d['t']),
          actor: d['actor'] as PageStory['timeline'][number]['actor'],
          text: li.querySelector('.text')?.textContent ?? '',
          kind: d['kind'] as PageStory['timeline'][number]['kind'],
          ...(d['token'] === undefined ? {} : { token: d['token'] }),
          ...(d['stale'] === 'true' ? { stale: true } : {}),
        };
      }),
      marks: Array.from(document.querySelectorAll('#lanes .mark'), (m) => m.textContent ?? ''),
    };
  });
}

/** The simulation, run here in Node, for the parameters the page says it used. */
async function simulate(p: PageStory['parameters']): Promise<LessonSummary> {
  return summarizeLesson(
    await runLessonStory({
      ttlMs: p.ttlMs,
      renewEveryMs: p.renewEveryMs,
      freezeAtMs: p.freezeAtMs,
      pauseMs: p.pauseMs,
      fencing: p.fencing,
      fault: p.fault,
      firstToken: BigInt(p.firstToken),
      bWorkMs: p.bWorkMs,
      claim: p.claim,
    }),
  );
}

function assertSameStory(shown: PageStory, sim: LessonSummary): void {
  assert.deepEqual(shown.timeline, sim.timeline);
  assert.equal(shown.headline, sim.headline);
  assert.equal(shown.verdict, sim.verdict);
  assert.equal(shown.outcome, sim.outcome);
}

describe('lesson page in a real browser (headless Chromium)', () => {
  let t: TestServer;
  let chromium: { browser: BrowserContext; close(): Promise<void> };
  let page: Page;
  let watch: PageWatch;

  before(async () => {
    t = await startTestServer();
    chromium = await launchChromium({ width: 1000, height: 900 });
    page = await chromium.browser.newPage();
    page.setDefaultTimeout(30_000);
    watch = watchPage(page, new URL(t.url).origin);
    await page.goto(t.url + '/lesson');
    await page.locator('#lesson[data-state="ready"]').waitFor();
  });

  after(async () => {
    await chromium?.close();
    await t?.close();
  });

  it('freeze 5 s: one owner at a time (B takes the lease only after A is done, nothing stale)', async () => {
    await set(page, { pauseS: 5, freezeAtS: 2, ttlS: 10, renewS: 3, fault: 'pause' });
    const shown = await read(page);
    assert.equal(shown.outcome, 'one_owner');
    // Storage's answers to A's writes carry A's token.
    const aDone = Math.max(
      ...shown.timeline.filter((e) => e.actor === 'Storage' && e.token === '33').map((e) => e.t),
    );
    const bGrant = shown.timeline.find((e) => e.actor === 'Worker B' && e.kind === 'grant');
    assert.ok(bGrant !== undefined && bGrant.t >= aDone, 'B takes the lease after A wrote');
    assert.equal(shown.timeline.filter((e) => e.stale === true).length, 0);
    assert.equal(shown.timeline.filter((e) => e.kind === 'expire').length, 0);
    assertSameStory(shown, await simulate(shown.parameters));
  });

  it("freeze 12 s without fencing: B's result overwritten, tokens 33 and 34 on the timeline", async () => {
    await set(page, { pauseS: 12, fencing: false });
    const shown = await read(page);
    assert.equal(shown.outcome, 'overwritten');
    assert.match(shown.headline, /overwrote B's result/);
    const grants = shown.timeline.filter((e) => e.kind === 'grant').map((e) => e.token);
    assert.deepEqual(grants, ['33', '34']);
    assert.ok(shown.marks.includes('33') && shown.marks.includes('34'), shown.marks.join(','));
    const stale = shown.timeline.filter((e) => e.stale === true);
    assert.deepEqual(
      stale.map((e) => [e.kind, e.token]),
      [['overwrite', '33']],
    );
    assert.ok(
      shown.timeline.some((e) => e.kind === 'expire'),
      'the expiry is drawn',
    );
    assertSameStory(shown, await simulate(shown.parameters));
  });

  it("fencing on: storage rejects A's write with token 33 after 34", async () => {
    await set(page, { pauseS: 12, fencing: true });
    const shown = await read(page);
    assert.equal(shown.outcome, 'rejected');
    assert.deepEqual(
      shown.timeline.filter((e) => e.stale === true).map((e) => [e.kind, e.token]),
      [['reject', '33']],
    );
    assertSameStory(shown, await simulate(shown.parameters));
  });

  it('every preset, with and without fencing, gives the verdict the simulation gives (pressed from the keyboard)', async () => {
    const outcomes = new Set<string>();
    for (const fencing of [false, true]) {
      await set(page, { fencing });
      for (const preset of LESSON_PRESETS) {
        const before = await runCount(page);
        const button = page.locator(`#presets button[data-preset="${preset.id}"]`);
        await button.focus();
        await page.keyboard.press('Enter');
        await waitForRunAfter(page, before);
        assert.equal(await button.getAttribute('aria-pressed'), 'true');
        const shown = await read(page);
        assert.equal(shown.parameters.fault, preset.options.fault);
        assert.equal(shown.parameters.pauseMs, preset.options.pauseMs);
        assertSameStory(shown, await simulate(shown.parameters));
        outcomes.add(shown.outcome);
      }
    }
    // The presets are not all alike: they show each outcome at least once.
    assert.deepEqual([...outcomes].sort(), [
      'one_owner',
      'overwritten',
      'rejected',
      'stale_accepted',
    ]);
  });

  it("A resumes before B's first write: with fencing alone the stale write lands, with a claim it is refused; the page draws what `demo --json` prints", async () => {
    await set(page, { fencing: true, claim: false });
    const preset = LESSON_PRESETS.find((p) => p.id === 'resume_before_first_write')!;
    const before = await runCount(page);
    await page.locator(`#presets button[data-preset="${preset.id}"]`).click();
    await waitForRunAfter(page, before);
    const demo = async (claim: boolean): Promise<LessonSummary> => {
      const { stdout } = await run(process.execPath, [
        CLI,
        'demo',
        '--json',
        '--pause',
        '12s',
        '--freeze-at',
        '2s',
        '--ttl',
        '10s',
        '--renew-every',
        '3s',
        '--b-work',
        '8s',
        ...(claim ? ['--claim'] : []),
      ]);
      return JSON.parse(stdout) as LessonSummary;
    };
    const without = await read(page);
    assert.equal(without.parameters.bWorkMs, 8_000);
    assert.equal(without.outcome, 'stale_accepted');
    assert.match(without.headline, /accepted A's stale write \(token 33\) before B's first write/);
    // A's write lands between B's grant and B's first write, marked stale.
    const order = without.timeline.map((e) => `${e.actor}:${e.kind}`);
    assert.ok(
      order.indexOf('Worker B:grant') < order.indexOf('Storage:accept') &&
        order.indexOf('Storage:accept') < order.indexOf('Worker B:write'),
      order.join(', '),
    );
    assert.deepEqual(
      without.timeline.filter((e) => e.stale === true).map((e) => [e.kind, e.token]),
      [['accept', '33']],
    );
    const d1 = await demo(false);
    assert.deepEqual(without.parameters, d1.parameters);
    assertSameStory(without, d1);

    await set(page, { claim: true });
    const withClaim = await read(page);
    assert.equal(withClaim.outcome, 'rejected');
    assert.match(withClaim.headline, /B had claimed 34 before its first write/);
    assert.deepEqual(
      withClaim.timeline.filter((e) => e.kind === 'claim').map((e) => [e.actor, e.token]),
      [
        ['Worker A', '33'],
        ['Worker B', '34'],
      ],
    );
    assert.deepEqual(
      withClaim.timeline.filter((e) => e.stale === true).map((e) => [e.kind, e.token]),
      [['reject', '33']],
    );
    const d2 = await demo(true);
    assert.deepEqual(withClaim.parameters, d2.parameters);
    assertSameStory(withClaim, d2);
    await set(page, { claim: false });
  });

  it('the page draws the timeline `leasehold demo --json` prints, over several parameter sets', async () => {
    const sets: Settings[] = [
      { pauseS: 12, freezeAtS: 2, ttlS: 10, renewS: 3, fault: 'pause', fencing: false, bWorkS: 1 },
      { pauseS: 7.5, freezeAtS: 1, ttlS: 5, renewS: 1.5, fault: 'pause', fencing: true, bWorkS: 1 },
      {
        pauseS: 20,
        freezeAtS: 4,
        ttlS: 8,
        renewS: 2,
        fault: 'delayed_request',
        fencing: false,
        bWorkS: 1,
      },
      {
        pauseS: 9,
        freezeAtS: 3,
        ttlS: 6,
        renewS: 2.5,
        fault: 'lost_renewal',
        fencing: true,
        bWorkS: 1,
      },
      { pauseS: 0, freezeAtS: 0, ttlS: 10, renewS: 3, fault: 'pause', fencing: false, bWorkS: 1 },
      {
        pauseS: 12,
        freezeAtS: 2,
        ttlS: 10,
        renewS: 3,
        fault: 'pause',
        fencing: true,
        bWorkS: 6,
        claim: true,
      },
    ];
    for (const s of sets) {
      await set(page, s);
      const shown = await read(page);
      const { stdout } = await run(process.execPath, [
        CLI,
        'demo',
        '--json',
        '--pause',
        `${s.pauseS}s`,
        '--freeze-at',
        `${s.freezeAtS}s`,
        '--ttl',
        `${s.ttlS}s`,
        '--renew-every',
        `${s.renewS}s`,
        '--fault',
        String(s.fault),
        '--b-work',
        `${s.bWorkS}s`,
        ...(s.fencing === true ? [] : ['--no-fencing']),
        ...(s.claim === true ? ['--claim'] : []),
      ]);
      const demo = JSON.parse(stdout) as LessonSummary;
      assert.deepEqual(shown.parameters, demo.parameters);
      assertSameStory(shown, demo);
    }
    await set(page, { claim: false });
  });

  it('is keyboard operable, labelled, and fits 400 px without sideways scrolling', async () => {
    await set(page, { pauseS: 12, freezeAtS: 2, ttlS: 10, renewS: 3, fault: 'pause', bWorkS: 1 });
    await page.setViewportSize({ width: 400, height: 800 });
    const before = await runCount(page);
    await page.getByLabel('How long A is stuck').focus();
    await page.keyboard.press('ArrowLeft');
    await waitForRunAfter(page, before);
    assert.equal((await read(page)).parameters.pauseMs, 11_500);
    assert.equal(await page.locator('#pause').getAttribute('aria-valuetext'), '11.5 s');
    const checked = await page.locator('#fencing').isChecked();
    const beforeToggle = await runCount(page);
    await page.getByLabel('Storage checks fencing tokens').focus();
    await page.keyboard.press('Space');
    await waitForRunAfter(page, beforeToggle);
    assert.equal(await page.locator('#fencing').isChecked(), !checked);
    for (const label of ['When it happens', 'Lease TTL', 'A renews every', 'What happens to A'])
      assert.equal(await page.getByLabel(label).count(), 1, label);
    const width = await page.evaluate(
      () => (globalThis as unknown as { document: Doc }).document.documentElement.scrollWidth,
    );
    assert.ok(width <= 400, `page is ${width}px wide at a 400px viewport`);
    assert.equal(await page.locator('#verdict').getAttribute('aria-live'), 'polite');
    // A renew interval as long as the TTL cannot work: the page says so instead of running.
    await page.locator('#renew').fill('10');
    await page.locator('#lesson[data-state="invalid"]').waitFor();
    assert.match(await page.locator('#error').innerText(), /renew interval shorter than the TTL/);
    await page.locator('#renew').fill('3');
    await page.locator('#lesson[data-state="ready"]').waitFor();
    await page.setViewportSize({ width: 1000, height: 900 });
  });

  it('shows no verdict and no timeline of the earlier settings while the settings are invalid', async () => {
    await set(page, {
      pauseS: 12,
      freezeAtS: 2,
      ttlS: 10,
      renewS: 3,
      fault: 'pause',
      fencing: false,
      bWorkS: 1,
    });
    const valid = await read(page);
    assert.equal(valid.outcome, 'overwritten');
    assert.ok(valid.timeline.length > 0 && valid.marks.length > 0);
    await page.locator('#renew').fill('10');
    await page.locator('#lesson[data-state="invalid"]').waitFor();
    const shown = await read(page);
    assert.equal(shown.outcome, '', 'no outcome colours the verdict box');
    assert.notEqual(shown.headline, valid.headline);
    assert.match(shown.headline, /No verdict/);
    assert.equal(shown.verdict, '');
    assert.deepEqual(shown.timeline, []);
    assert.deepEqual(shown.marks, []);
    assert.equal(await page.locator('#lesson').getAttribute('data-parameters'), null);
    // Valid again: the story for the new settings is drawn.
    await page.locator('#renew').fill('3');
    await page.locator('#lesson[data-state="ready"]').waitFor();
    const again = await read(page);
    assert.equal(again.outcome, 'overwritten');
    assertSameStory(again, await simulate(again.parameters));
  });

  it('answers the check question on the page: the pause between check and write', async () => {
    const text = await page.locator('section[aria-labelledby="check-title"]').innerText();
    assert.match(text, /stops when it fails to renew/);
    assert.match(text, /pauses between that check and the write/);
    assert.match(text, /Storage can only refuse token 33 once it\s+has seen token 34/);
    assert.match(
      text,
      /B installs token 34\s+at storage as it takes the lease, before writing anything/,
    );
  });

  it('loaded everything from the server itself, with no console errors', () => {
    assert.deepEqual(watch.foreignRequests, []);
    assert.ok(watch.requests.some((u) => u.endsWith('/lesson/js/sim/lesson.js')));
    assert.deepEqual(watch.pageErrors, []);
    assert.deepEqual(watch.consoleErrors, []);
  });
});
