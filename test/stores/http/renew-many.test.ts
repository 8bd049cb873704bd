import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renewBody, renewInRequests, renewOp } from '../../../src/stores/http/renew-many.js';
import type { Answer } from '../../../src/stores/http/errors.js';
import type { StoreRenewRequest, StoreRequestOptions } from '../../../src/core/store.js';

const OPTS: StoreRequestOptions = { timeoutMs: 1000, signal: new AbortController().signal };

function lease(key: string, token: bigint, ttlMs = 10_000): StoreRenewRequest {
  return { key, leaseId: '0123456789abcdef0123456789abcdef', token, ttlMs };
}

describe('HttpLeaseStore.renewMany request bodies', () => {
  it('writes each renew operation exactly as JSON.stringify of its object would', () => {
    const keys = [
      'plain/key',
      'quote"and\\backslash',
      'line\nbreak\ttab\u0000nul',
      'ünïcödé/ключ/鍵',
      'lone \ud800 surrogate',
      'pair \ud83d\ude00 emoji',
      'del\u007f and tilde~',
      '',
    ];
    for (const key of keys) {
      for (const token of [1n, 2n ** 53n + 1n, 2n ** 63n - 1n]) {
        const l = lease(key, token, 1234);
        const { text, bytes } = renewOp(l);
        assert.equal(text, JSON.stringify({ op: 'renew', ...renewBody(l) }));
        assert.equal(bytes, Buffer.byteLength(text), 'its size in UTF-8 bytes');
        const parsed = JSON.parse(text) as { token: string; key: string };
        assert.equal(parsed.token, token.toString(), 'the token as a decimal string');
        assert.equal(parsed.key, key.isWellFormed() ? key : parsed.key);
      }
    }
  });

  it('splits leases into requests within the size limit, each a valid batch body in order', async () => {
    const bodies: string[] = [];
    const leases = Array.from({ length: 50 }, (_, i) =>
      lease(`k/${i}/${'x'.repeat(i)}`, BigInt(i + 1)),
    );
    const results = await renewInRequests(
      {
        sendBatch(text): Promise<Answer> {
          bodies.push(text);
          const ops = (JSON.parse(text) as { ops: unknown[] }).ops;
          return Promise.resolve({
            status: 200,
            body: { results: ops.map(() => ({ httpStatus: 200, body: { status: 'renewed' } })) },
          });
        },
        renewOne: () => Promise.resolve({ status: 'renewed' }),
      },
      leases,
      { maxOps: 16, maxBytes: 2_000, maxRenewals: 2_000 },
      OPTS,
    );
    assert.equal(results.length, leases.length);
    assert.ok(bodies.length > 1, `${bodies.length} requests`);
    const sent: string[] = [];
    for (const b of bodies) {
      assert.ok(Buffer.byteLength(b) <= 2_000, `a body of ${Buffer.byteLength(b)} bytes`);
      const ops = (JSON.parse(b) as { ops: Array<{ op: string; key: string; token: string }> }).ops;
      for (const op of ops) {
        assert.equal(op.op, 'renew');
        sent.push(`${op.key}#${op.token}`);
      }
    }
    assert.deepEqual(
      sent,
      leases.map((l) => `${l.key}#${l.token}`),
      'every lease once, in order',
    );
  });
});
