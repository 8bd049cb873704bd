import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { linkSignals, onAbortOf } from '../../../src/core/runtime/signals.js';

describe('onAbortOf', () => {
  it('calls the subscribers still subscribed, in subscription order, once, with the reason', () => {
    const source = new AbortController();
    const calls: string[] = [];
    const un = ['a', 'b', 'c', 'd', 'e'].map((name) =>
      onAbortOf(source.signal, (reason) => calls.push(`${name}:${String(reason)}`)),
    );
    un[0]!(); // head
    un[2]!(); // middle
    un[4]!(); // tail
    un[2]!(); // twice is harmless
    onAbortOf(source.signal, (reason) => calls.push(`f:${String(reason)}`));
    source.abort('why');
    source.abort('again');
    assert.deepEqual(calls, ['b:why', 'd:why', 'f:why']);
  });

  it('keeps its list whole when subscribers come and go in any order', () => {
    const source = new AbortController();
    const called = new Set<number>();
    const live = new Map<number, () => void>();
    // A fixed pseudo-random order of subscribes and unsubscribes.
    let seed = 7;
    const next = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648);
    for (let i = 0; i < 500; i++) {
      if (live.size > 0 && next() % 3 === 0) {
        const keys = [...live.keys()];
        const k = keys[next() % keys.length]!;
        live.get(k)!();
        live.delete(k);
      } else {
        live.set(
          i,
          onAbortOf(source.signal, () => called.add(i)),
        );
      }
    }
    source.abort();
    assert.deepEqual(
      [...called].sort((a, b) => a - b),
      [...live.keys()].sort((a, b) => a - b),
    );
  });

  it('lets a subscriber unsubscribe another while the source fires', () => {
    const source = new AbortController();
    const calls: string[] = [];
    let unB: () => void = () => undefined;
    onAbortOf(source.signal, () => {
      calls.push('a');
      unB();
    });
    unB = onAbortOf(source.signal, () => calls.push('b'));
    source.abort();
    unB();
    assert.deepEqual(calls, ['a', 'b']);
  });
});

describe('linkSignals', () => {
  it('aborts the link when any source aborts, and not after dispose', () => {
    const a = new AbortController();
    const b = new AbortController();
    const first = linkSignals([a.signal, b.signal]);
    const second = linkSignals([a.signal, b.signal]);
    second.dispose();
    b.abort('b');
    assert.equal(first.signal.aborted, true);
    assert.equal(first.signal.reason, 'b');
    assert.equal(second.signal.aborted, false);
  });
});
