import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createGateway, type Gateway } from '../../../src/fencing/gateway/index.js';
import { tempDir } from '../../support/tmp.js';

const LIMIT = 1024;
const WAIT_MS = 20_000;

/** What a real upstream saw: requests begun, requests whose body arrived complete, requests cut off. */
interface CountingUpstream {
  readonly url: string;
  started: number;
  completed: number;
  cutOff: number;
  /** Bodies of the complete requests. */
  readonly bodies: string[];
  /** Resolves once the upstream holds the first bytes of a request body. */
  firstBytes: Promise<void>;
  /** Resolves once a request was cut off before its end. */
  firstCutOff: Promise<void>;
  close(): Promise<void>;
}

async function startCountingUpstream(): Promise<CountingUpstream> {
  let gotBytes!: () => void;
  let gotCutOff!: () => void;
  const up = {
    url: '',
    started: 0,
    completed: 0,
    cutOff: 0,
    bodies: [] as string[],
    firstBytes: new Promise<void>((r) => (gotBytes = r)),
    firstCutOff: new Promise<void>((r) => (gotCutOff = r)),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
  const server: Server = createServer((req, res) => {
    up.started++;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => {
      chunks.push(c);
      gotBytes();
    });
    // 'end' only comes with the chunked message's terminating chunk: a complete request.
    req.on('end', () => {
      up.completed++;
      up.bodies.push(Buffer.concat(chunks).toString('latin1'));
      res.end('ok');
    });
    req.on('close', () => {
      if (!req.complete) {
        up.cutOff++;
        gotCutOff();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  up.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return up;
}

function bounded<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: nothing after ${WAIT_MS} ms`)), WAIT_MS);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * A chunked PUT (no Content-Length): writes `first`, waits for `between`, then writes `second`
 * and, if `end`, the terminating chunk. Resolves with the gateway's answer.
 */
function chunkedPut(
  url: string,
  headers: Record<string, string>,
  first: string,
  between: Promise<void>,
  second: string,
  end: boolean,
): Promise<{ status: number; body: string; connection: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/reports/1`, { method: 'PUT', headers });
    req.on('response', (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        resolve({
          status: res.statusCode ?? 0,
          body: Buffer.concat(chunks).toString('utf8'),
          connection: res.headers.connection,
        });
        req.destroy();
      });
    });
    // Writes after the gateway closed the connection may fail; the answer is what counts.
    req.on('error', (err) => (req.writableEnded ? undefined : reject(err)));
    req.write(first);
    void between.then(() => {
      if (req.destroyed) return;
      req.write(second);
      if (end) req.end();
    });
  });
}

describe('gateway: a chunked body (no Content-Length) and the body limit', () => {
  let up: CountingUpstream;
  let gw: Gateway;
  let url: string;
  const tmp = tempDir('gw-chunked');
  before(async () => {
    up = await startCountingUpstream();
    gw = await createGateway({
      upstream: up.url,
      routes: [{ methods: ['PUT'], path: '/reports/:id', scope: 'report/{id}' }],
      marks: `sqlite:${tmp.dir}/marks.db`,
      port: 0,
      logLevel: 'silent',
      maxBodyBytes: LIMIT,
    });
    url = await gw.listen();
  });
  after(async () => {
    await gw.close();
    await up.close();
    tmp.remove();
  });

  it('a body that grows past the limit gets 413 and the upstream never sees a complete request', async () => {
    const answer = await bounded(
      chunkedPut(
        url,
        { 'fencing-token': '9' },
        'a'.repeat(600),
        // The first part is already at the upstream before the limit is crossed.
        up.firstBytes,
        'b'.repeat(600),
        false,
      ),
      'the answer to the oversized body',
    );
    assert.equal(answer.status, 413);
    assert.deepEqual(Object.keys(JSON.parse(answer.body) as object), ['error']);
    const err = (JSON.parse(answer.body) as { error: { code: string; message: string } }).error;
    assert.equal(err.code, 'payload_too_large');
    assert.match(err.message, /1024 bytes/);
    assert.equal(answer.connection, 'close', 'the rest of the body is not read');
    await bounded(up.firstCutOff, 'the upstream request cut off');
    assert.equal(up.started, 1, 'the forward had begun: the body is streamed');
    assert.equal(up.cutOff, 1, 'the upstream saw its request broken off');
    assert.equal(up.completed, 0, 'and never a complete request');
    // The token had passed before the body arrived: the mark is at 9 (docs/gateway.md).
    assert.equal((await gw.marks.read('report/1')).highWaterMark, 9n);
  });

  it('a chunked body within the limit reaches the upstream whole, and so does a retry under the same token', async () => {
    const before = up.completed;
    const answer = await bounded(
      chunkedPut(
        url,
        { 'fencing-token': '9' },
        'c'.repeat(500),
        Promise.resolve(),
        'd'.repeat(524),
        true,
      ),
      'the answer to a chunked body of exactly the limit',
    );
    assert.equal(answer.status, 200);
    assert.equal(up.completed, before + 1);
    assert.equal(up.bodies.at(-1), 'c'.repeat(500) + 'd'.repeat(524));
    assert.equal(up.cutOff, 1);
  });

  it('with an idempotency key, the cut-off attempt counts as unknown: its retry answers duplicate and is not sent', async () => {
    const completed = up.completed;
    const cutOff = up.cutOff;
    const first = await bounded(
      chunkedPut(
        url,
        { 'fencing-token': '10', 'idempotency-key': 'big-1' },
        'e'.repeat(600),
        Promise.resolve(),
        'f'.repeat(600),
        true,
      ),
      'the answer to the oversized body with a key',
    );
    assert.equal(first.status, 413);
    const retry = await fetch(`${url}/reports/1`, {
      method: 'PUT',
      headers: { 'fencing-token': '10', 'idempotency-key': 'big-1' },
      body: 'small',
    });
    assert.equal(retry.status, 409);
    assert.equal(((await retry.json()) as { error: { code: string } }).error.code, 'duplicate');
    assert.equal(up.completed, completed, 'neither attempt reached the upstream complete');
    assert.ok(up.cutOff <= cutOff + 1);
    assert.equal((await gw.marks.read('report/1')).highWaterMark, 10n);
  });
});
