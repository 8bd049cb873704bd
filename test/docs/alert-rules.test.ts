import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { PostgresLeaseStore } from '../../src/stores/postgres/store.js';
import { freePort } from '../support/ports.js';
import { eventually } from '../support/time.js';
import { startTestServer, type TestServer } from '../support/lease-server.js';
import { tempDir } from '../support/tmp.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The alert rules of docs/production.md: the first YAML block under "Metrics to alert on". */
function documentedRules(): string {
  const text = readFileSync(join(ROOT, 'docs/production.md'), 'utf8');
  const section = text.slice(text.indexOf('## Metrics to alert on'));
  const m = /```yaml\n([\s\S]*?)```/.exec(section);
  assert.ok(m !== null, 'docs/production.md has the alert rules as a yaml block');
  return m[1] as string;
}

function promtool(args: string[], cwd: string): { code: number | null; out: string } {
  const r = spawnSync('promtool', args, { cwd, encoding: 'utf8', timeout: 60_000 });
  if (r.error !== undefined) throw r.error;
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

/** Parses Prometheus text into `series → value` (labels kept as written). */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

/** A series as promtool's input wants it, with the labels Prometheus adds at scrape time. */
function withTarget(series: string, instance: string): string {
  const target = `instance="${instance}",job="leasehold"`;
  const open = series.indexOf('{');
  if (open < 0) return `${series}{${target}}`;
  const body = series.slice(open + 1, -1);
  return `${series.slice(0, open)}{${body === '' ? '' : `${body},`}${target}}`;
}

async function scrape(t: TestServer): Promise<Map<string, number>> {
  const res = await fetch(`${t.url}/metrics`);
  assert.equal(res.status, 200);
  return samples(await res.text());
}

async function post(t: TestServer, path: string, body: unknown): Promise<Response> {
  return fetch(`${t.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

describe("docs/production.md's alert rules, evaluated by promtool on a real server's metrics", () => {
  const tmp = tempDir('alert-rules');
  let healthy: TestServer;
  let cut: TestServer;

  before(async () => {
    healthy = await startTestServer();
    // A server whose PostgreSQL is not there: every acquisition answers unavailable.
    const port = await freePort();
    cut = await startTestServer({
      store: new PostgresLeaseStore({
        connectionString: `postgres://nobody@127.0.0.1:${port}/none`,
      }),
    });
  });
  after(async () => {
    await healthy?.close();
    await cut?.close();
    tmp.remove();
  });

  it('the rules file is valid (promtool check rules)', () => {
    writeFileSync(join(tmp.dir, 'rules.yml'), documentedRules());
    const r = promtool(['check', 'rules', 'rules.yml'], tmp.dir);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /SUCCESS: 5 rules found/);
  });

  it('fires on a lost lease, a stale token and an unreachable store, and on nothing else', async () => {
    const before = { healthy: await scrape(healthy), cut: await scrape(cut) };

    // A lease that ran out at the store, then renewed: lost.
    const key = `alerts/${process.pid}`;
    const acquired = (await (await post(healthy, '/v1/acquire', { key, ttl: '100ms' })).json()) as {
      leaseId: string;
      token: string;
    };
    await eventually('the lease to run out at the store', async () => {
      const res = await fetch(`${healthy.url}/v1/leases/${key}`);
      const state = (await res.json()) as { holder: unknown };
      return state.holder === null ? true : undefined;
    });
    const renew = await post(healthy, '/v1/renew', {
      key,
      leaseId: acquired.leaseId,
      token: acquired.token,
      ttl: '10s',
    });
    assert.equal(renew.status, 410);
    // A fence reports that it refused a stale token.
    const fenced = await post(healthy, '/v1/fence-decisions', {
      key,
      token: acquired.token,
      result: 'stale_fence',
      highWaterMark: (BigInt(acquired.token) + 1n).toString(),
      resource: 'reports-db',
    });
    assert.equal(fenced.status, 200, await fenced.text());
    const refused = await post(cut, '/v1/acquire', { key, ttl: '10s' });
    assert.equal(refused.status, 503);
    const afterScrape = { healthy: await scrape(healthy), cut: await scrape(cut) };

    // Each server as its own scrape target: its value before the events at 0m, after from 1m.
    const inputSeries: string[] = [];
    for (const [name, instance] of [
      ['healthy', 'leasehold-a:7400'],
      ['cut', 'leasehold-b:7400'],
    ] as const) {
      for (const [series, value] of afterScrape[name]) {
        if (!Number.isFinite(value)) continue;
        const first = before[name].get(series) ?? 0;
        inputSeries.push(
          `      - series: '${withTarget(series, instance)}'\n        values: '${first} ${value}x15'`,
        );
      }
      inputSeries.push(
        `      - series: 'up{instance="${instance}",job="leasehold"}'\n        values: '1x15'`,
      );
    }
    const expect = (
      alert: string,
      firing: { instance: string; severity: string; summary: string }[],
    ) =>
      `      - eval_time: 5m\n        alertname: ${alert}\n        exp_alerts:${
        firing.length === 0
          ? ' []'
          : firing
              .map(
                (f) =>
                  `\n          - exp_labels: { instance: '${f.instance}', severity: ${f.severity} }\n            exp_annotations: { summary: '${f.summary}' }`,
              )
              .join('')
      }`;
    const tests = [
      'rule_files: [rules.yml]',
      'evaluation_interval: 1m',
      'tests:',
      '  - interval: 1m',
      '    input_series:',
      ...inputSeries,
      '    alert_rule_test:',
      expect('LeaseholdLeasesLost', [
        {
          instance: 'leasehold-a:7400',
          severity: 'ticket',
          summary: 'leases lost on leasehold-a:7400',
        },
      ]),
      expect('LeaseholdStaleTokenRejected', [
        {
          instance: 'leasehold-a:7400',
          severity: 'ticket',
          summary: 'a stale token was rejected on leasehold-a:7400',
        },
      ]),
      expect('LeaseholdStoreUnavailable', [
        {
          instance: 'leasehold-b:7400',
          severity: 'page',
          summary: 'leasehold on leasehold-b:7400 cannot reach its store',
        },
      ]),
      expect('LeaseholdGatewayStaleRequests', []),
      expect('LeaseholdDown', []),
    ].join('\n');
    writeFileSync(join(tmp.dir, 'rules.yml'), documentedRules());
    writeFileSync(join(tmp.dir, 'tests.yml'), `${tests}\n`);
    const r = promtool(['test', 'rules', 'tests.yml'], tmp.dir);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /SUCCESS/);
  });
});
