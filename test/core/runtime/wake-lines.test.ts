import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { WakeLines } from '../../../src/core/runtime/wake-lines.js';

/** Records which watcher was told what, in order. */
function recorder(): { told: string[]; watcher: (name: string) => (c?: 'granted') => void } {
  const told: string[] = [];
  return { told, watcher: (name) => (c) => told.push(c === undefined ? name : `${name}:${c}`) };
}

describe('WakeLines', () => {
  it("'one': a release wakes the longest-waiting waiter and every observer", () => {
    const lines = new WakeLines('one');
    const r = recorder();
    lines.add('k', r.watcher('a'));
    lines.add('k', r.watcher('obs'), true);
    lines.add('k', r.watcher('b'));
    lines.released('k');
    assert.deepEqual(r.told, ['obs', 'a']);
  });

  it('a woken waiter that stays keeps its place; one that leaves while the key may be free passes the wake-up on', () => {
    const lines = new WakeLines('one');
    const r = recorder();
    const offA = lines.add('k', r.watcher('a'));
    lines.add('k', r.watcher('b'));
    lines.released('k');
    lines.released('k');
    assert.deepEqual(r.told, ['a', 'a'], 'a stays at the head of the line');
    offA();
    assert.deepEqual(r.told, ['a', 'a', 'b'], 'leaving with the key possibly free wakes b');
  });

  it('queuedBehind: true for every waiter but the first, false for observers and with all', () => {
    const lines = new WakeLines('one');
    const r = recorder();
    const obs = lines.add('k', r.watcher('obs'), true);
    const a = lines.add('k', r.watcher('a'));
    const b = lines.add('k', r.watcher('b'));
    assert.deepEqual(
      [obs.queuedBehind(), a.queuedBehind(), b.queuedBehind()],
      [false, false, true],
    );
    a();
    assert.equal(b.queuedBehind(), false, 'b is first once a has left');
    b();
    assert.equal(b.queuedBehind(), false, 'a removed watcher is behind nobody');
    const all = new WakeLines('all');
    all.add('k', r.watcher('c'));
    assert.equal(all.add('k', r.watcher('d')).queuedBehind(), false, "'all' wakes d too");
  });

  it('after a grant, a woken waiter that leaves wakes nobody', () => {
    for (const grant of ['granted', 'noteGranted'] as const) {
      const lines = new WakeLines('one');
      const r = recorder();
      const offA = lines.add('k', r.watcher('a'));
      lines.add('k', r.watcher('b'));
      lines.released('k');
      lines[grant]('k');
      offA();
      const expected = grant === 'granted' ? ['a', 'a:granted', 'b:granted'] : ['a'];
      assert.deepEqual(r.told, expected, grant);
    }
  });

  it("'all' and recheck wake every watcher; the last removal forgets the key", () => {
    const lines = new WakeLines('all');
    const r = recorder();
    const offA = lines.add('k', r.watcher('a'));
    const offB = lines.add('k', r.watcher('b'));
    lines.released('k');
    assert.deepEqual(r.told, ['a', 'b']);
    const one = new WakeLines('one');
    const s = recorder();
    one.add('k', s.watcher('a'));
    one.add('k', s.watcher('b'));
    one.recheck('k');
    one.recheckAll();
    assert.deepEqual(s.told, ['a', 'b', 'a', 'b']);
    offA();
    offB();
    offB();
    assert.equal(lines.has('k'), false);
    assert.equal(lines.size, 0);
  });
});
