import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compareBytes, nextMacrotask, utf8, utf8ByteLength } from '../../src/core/platform.js';
import { compareKeys } from '../../src/stores/memory/store.js';

const SAMPLES = ['', 'a', 'é', '€', '😀', 'a\uD800', '\uDC00b', 'z', 'ä', '\uFFFF', '\u{10000}'];

describe('platform helpers (the core without Node built-ins)', () => {
  it('counts UTF-8 bytes exactly as Buffer.byteLength does, lone surrogates included', () => {
    for (const s of SAMPLES) assert.equal(utf8ByteLength(s), Buffer.byteLength(s, 'utf8'), s);
  });

  it('orders keys by UTF-8 bytes exactly as Buffer.compare does', () => {
    for (const x of SAMPLES)
      for (const y of SAMPLES) {
        const expected = Buffer.compare(Buffer.from(x, 'utf8'), Buffer.from(y, 'utf8'));
        assert.equal(compareKeys(x, y), expected, `${x} vs ${y}`);
        assert.equal(compareBytes(utf8(x), utf8(y)), expected);
      }
  });

  it('nextMacrotask runs after every queued promise job', async () => {
    const seen: string[] = [];
    void Promise.resolve().then(() => seen.push('micro'));
    await nextMacrotask();
    assert.deepEqual(seen, ['micro']);
  });
});
