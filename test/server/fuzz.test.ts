import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Ajv } from 'ajv';
import fc from 'fast-check';
import { Pool, errors as undiciErrors } from 'undici';
import { ERROR_BODY } from '../../src/server/answer-schemas.js';
import { fuzzRequests, type FuzzRequest } from '../support/http-fuzz.js';
import { uniqueKey } from '../support/keys.js';
import {
  startTestServer,
  TEST_AUTH,
  TEST_TOKENS,
  type TestServer,
} from '../support/lease-server.js';
import { rawRequest } from '../support/raw-http.js';

/**
 * Property-based fuzzing of the HTTP API over real connections: generated methods, paths
 * (percent-encoded or not), headers and bodies, some through an HTTP client and some as raw
 * bytes on a socket. Every answer must be 2xx or 4xx, an error answer must be
 * `{"error":{"code","message"}}`, and the server fixture checks each answer against the
 * OpenAPI document. A lease held before the run must be exactly as it was after it.
 *
 * `npm test` sends 2,000 requests; LEASEHOLD_CHAOS=1 sends 50,000. LEASEHOLD_FUZZ_SEED replays
 * a run (fast-check prints the seed and the shrunk request of a failure).
 */
const CHAOS = process.env['LEASEHOLD_CHAOS'] === '1';
const RUNS = CHAOS ? 50_000 : 2_000;
const TIME_LIMIT_MS = CHAOS ? 1_200_000 : 120_000;
const SEED = process.env['LEASEHOLD_FUZZ_SEED'];

const isErrorBody = new Ajv({ strict: false }).compile(ERROR_BODY);

const TOKEN_CHARS = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const PATH_CHARS = /^\/[\x21-\x7e\x80-\xff]*$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** Whether an HTTP client would send this request as generated (else it goes raw). */
function clientSendable(r: FuzzRequest): boolean {
  return (
    TOKEN_CHARS.test(r.method) &&
    PATH_CHARS.test(r.path) &&
    Object.values(r.headers).every((v) => HEADER_VALUE.test(v))
  );
}

/** The request as bytes: one request, framed by Content-Length, so the answer always comes. */
function rawBytes(r: FuzzRequest): Buffer {
  const body = Buffer.from(r.body ?? '');
  const lines = [`${r.method} ${r.path} HTTP/1.1`, 'Host: fuzz'];
  // CR and LF would end the header block early; everything else is sent as generated.
  for (const [k, v] of Object.entries(r.headers)) lines.push(`${k}: ${v.replace(/[\r\n]/g, ' ')}`);
  if (r.body !== undefined) lines.push(`Content-Length: ${body.length}`);
  lines.push('Connection: close', '', '');
  return Buffer.concat([Buffer.from(lines.join('\r\n')), body]);
}

interface Seen {
  readonly status: number;
  readonly contentType: string;
  readonly body: string;
}

function violation(r: FuzzRequest, a: Seen): string | undefined {
  const where = `${r.method} ${r.path.slice(0, 80)} → ${a.status}`;
  if (a.status >= 500) return `${where}: 5xx ${a.body.slice(0, 200)}`;
  if (a.status < 200 || (a.status >= 300 && a.status < 400) || a.status >= 600) {
    return `${where}: status outside 2xx/4xx`;
  }
  if (r.method === 'HEAD' || a.contentType.startsWith('text/event-stream')) return undefined;
  if (a.status >= 400) {
    if (!a.contentType.startsWith('application/json')) return `${where}: ${a.contentType} error`;
    let parsed: unknown;
    try {
      parsed = JSON.parse(a.body);
    } catch {
      return `${where}: error body is not JSON: ${a.body.slice(0, 200)}`;
    }
    if (!isErrorBody(parsed)) return `${where}: not the error shape: ${a.body.slice(0, 200)}`;
  }
  return undefined;
}

describe('HTTP API fuzz: generated requests over real connections', () => {
  let t: TestServer;
  let pool: Pool;
  const heldKey = `jobs/${uniqueKey('fuzz-held')}`;
  let held: { leaseId: string; token: string };

  before(async () => {
    t = await startTestServer({ auth: TEST_AUTH, maxWaitMs: 1000 });
    pool = new Pool(t.url, { connections: 4 });
    const res = await fetch(`${t.url}/v1/acquire`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_TOKENS.jobs}` },
      body: JSON.stringify({ key: heldKey, ttl: '10m', ownerId: 'held-before-the-fuzz' }),
    });
    assert.equal(res.status, 200);
    held = (await res.json()) as { leaseId: string; token: string };
  });
  after(async () => {
    await pool?.close();
    await t?.close();
  });

  async function send(r: FuzzRequest): Promise<Seen> {
    if (!r.raw && clientSendable(r)) {
      try {
        const res = await pool.request({
          method: r.method,
          path: r.path,
          headers: r.headers,
          body: r.body,
          headersTimeout: 15_000,
          bodyTimeout: 15_000,
        });
        const contentType = String(res.headers['content-type'] ?? '');
        if (contentType.startsWith('text/event-stream')) {
          // An event stream never ends by itself: stop reading it (the abort is expected).
          res.body.on('error', () => {});
          res.body.destroy();
          return { status: res.statusCode, contentType, body: '' };
        }
        return { status: res.statusCode, contentType, body: await res.body.text() };
      } catch (err) {
        // What the client itself refuses to send (a body on HEAD, …) goes raw instead.
        if (!(err instanceof undiciErrors.InvalidArgumentError)) throw err;
      }
    }
    const a = await rawRequest(t.url, rawBytes(r), 15_000);
    return { status: a.status, contentType: a.headers['content-type'] ?? '', body: a.body };
  }

  it(
    `answers ${RUNS} generated requests 2xx or 4xx in the documented shape, and the held lease is untouched`,
    {
      timeout: TIME_LIMIT_MS + 60_000,
    },
    async (ctx) => {
      const statuses = new Map<number, number>();
      let sent = 0;
      const arb = fuzzRequests({
        key: heldKey,
        token: held.token,
        bearers: [TEST_TOKENS.admin, TEST_TOKENS.jobs, TEST_TOKENS.reader, 'not-a-token-000'],
      });
      await fc.assert(
        fc.asyncProperty(arb, async (r) => {
          const a = await send(r);
          sent++;
          statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
          const v = violation(r, a);
          if (v !== undefined) throw new Error(v);
        }),
        {
          numRuns: RUNS,
          interruptAfterTimeLimit: TIME_LIMIT_MS,
          markInterruptAsFailure: true,
          ...(SEED === undefined ? {} : { seed: Number(SEED) }),
        },
      );
      const classes = [...statuses].sort(([a], [b]) => a - b).map(([s, n]) => `${s}×${n}`);
      ctx.diagnostic(`${sent} requests: ${classes.join(' ')}`);
      assert.ok(sent >= RUNS, `${sent} requests sent`);
      assert.ok(
        [...statuses.keys()].some((s) => s < 300),
        'some generated requests succeeded (the generator reaches the operations)',
      );
      assert.deepEqual(t.contract.violations, [], 'every answer matched the OpenAPI document');

      // The lease held before the fuzz: same holder, token, lease id, and still renewable.
      const bearer = { authorization: `Bearer ${TEST_TOKENS.jobs}` };
      const state = (await (
        await fetch(`${t.url}/v1/leases/${encodeURIComponent(heldKey)}`, { headers: bearer })
      ).json()) as { lastToken: string; holder: { token: string; leaseIdPrefix: string } | null };
      assert.ok(state.holder !== null, 'the held lease is still live');
      assert.equal(state.holder.token, held.token);
      assert.equal(state.holder.leaseIdPrefix, held.leaseId.slice(0, 8));
      assert.equal(state.lastToken, held.token, 'no grant on the held key during the fuzz');
      const ref = { key: heldKey, leaseId: held.leaseId, token: held.token };
      for (const [op, body] of [
        ['renew', { ...ref, ttl: '1m' }],
        ['release', ref],
      ] as const) {
        const res = await fetch(`${t.url}/v1/${op}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...bearer },
          body: JSON.stringify(body),
        });
        assert.equal(res.status, 200, `${op}: ${await res.text()}`);
      }
    },
  );
});
