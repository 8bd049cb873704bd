import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { systemClock, type Clock, type TimerHandle } from '../../../src/core/runtime/clock.js';
import { ManualClock } from '../../../src/testing/manual-clock.js';
import { boundedRequest } from '../../../src/core/runtime/request.js';
import { Timed, TimeoutQueue } from '../../../src/core/runtime/timeout-queue.js';

class Entry extends Timed {
  constructor(
    readonly name: string,
    private readonly fired: Array<{ name: string; at: number }>,
    private readonly clock: Clock,
  ) {
    super();
  }
  onTimeout(): void {
    this.fired.push({ name: this.name, at: this.clock.now() });
  }
}

/**
 * A ManualClock whose readings can be stepped (back, or to NaN) and which can `retain`, as
 * Node's clock can: it records which timers would keep the process alive.
 */
class SteppableClock implements Clock {
  readonly manual = new ManualClock();
  offset = 0;
  made = 0;
  readonly unreferenced = new Set<TimerHandle>();
  constructor(private readonly lazy: boolean) {
    if (lazy) {
      this.retain = (handle, keepAlive) => {
        if (keepAlive) this.unreferenced.delete(handle);
        else this.unreferenced.add(handle);
      };
    }
  }
  retain?: (handle: TimerHandle, keepAlive: boolean) => void;
  now(): number {
    return this.manual.now() + this.offset;
  }
  wallNow(): number {
    return this.manual.wallNow();
  }
  setTimeout(callback: () => void, ms: number): TimerHandle {
    this.made++;
    return this.manual.setTimeout(callback, ms);
  }
  clearTimeout(handle: TimerHandle): void {
    this.unreferenced.delete(handle);
    this.manual.clearTimeout(handle);
  }
}

describe('TimeoutQueue', () => {
  it('fires each entry at its deadline, in order, and never one taken out', async () => {
    const clock = new ManualClock();
    const q = new TimeoutQueue(clock);
    const fired: Array<{ name: string; at: number }> = [];
    const a = new Entry('a', fired, clock);
    const b = new Entry('b', fired, clock);
    const c = new Entry('c', fired, clock);
    const d = new Entry('d', fired, clock);
    q.add(a, 100);
    await clock.advance(10);
    q.add(b, 100);
    q.add(c, 100);
    q.add(d, 40); // another timeout: its own list
    assert.equal(clock.pendingTimers(), 2, 'one timer per distinct timeout, not per entry');
    q.remove(c);
    q.remove(c); // twice is harmless
    await clock.advance(200);
    assert.deepEqual(fired, [
      { name: 'd', at: 50 },
      { name: 'a', at: 100 },
      { name: 'b', at: 110 },
    ]);
    assert.equal(clock.pendingTimers(), 0, 'nothing left armed');
    assert.equal(q.timers(), 0);
  });

  it('on a clock without retain, clears the timer as soon as its list is empty', async () => {
    const clock = new ManualClock();
    const q = new TimeoutQueue(clock);
    const fired: Array<{ name: string; at: number }> = [];
    for (let i = 0; i < 3; i++) {
      const e = new Entry(`e${i}`, fired, clock);
      q.add(e, 5000);
      assert.equal(clock.pendingTimers(), 1);
      q.remove(e);
      assert.equal(clock.pendingTimers(), 0, 'simulation and tests see no leftover timer');
    }
    await clock.advance(10_000);
    assert.deepEqual(fired, []);
  });

  it('on a clock with retain, keeps one idle timer unreferenced and reuses it', async () => {
    const clock = new SteppableClock(true);
    const q = new TimeoutQueue(clock);
    const fired: Array<{ name: string; at: number }> = [];
    for (let i = 0; i < 50; i++) {
      const e = new Entry(`e${i}`, fired, clock);
      q.add(e, 5000);
      assert.equal(clock.unreferenced.size, 0, 'a queued request keeps the process alive');
      q.remove(e);
      assert.equal(clock.unreferenced.size, 1, 'an idle timer does not');
      await clock.manual.advance(10);
    }
    assert.equal(clock.made, 1, '50 requests, one timer');
    const late = new Entry('late', fired, clock);
    q.add(late, 5000); // at 500: due at 5500; the timer is still the one armed at 0 for 5000
    await clock.manual.advance(4500);
    assert.equal(fired.length, 0, 'the old timer fires at 5000 and re-arms for the head');
    assert.equal(q.timers(), 1);
    await clock.manual.advance(500);
    assert.deepEqual(fired, [{ name: 'late', at: 5500 }]);
    assert.equal(q.timers(), 0, 'a list whose timer fired with nothing queued is dropped');
    assert.equal(clock.manual.pendingTimers(), 0);
  });

  it('trim() clears idle timers and keeps the ones with requests queued', () => {
    const clock = new SteppableClock(true);
    const q = new TimeoutQueue(clock);
    const fired: Array<{ name: string; at: number }> = [];
    const idle = new Entry('idle', fired, clock);
    const busy = new Entry('busy', fired, clock);
    q.add(idle, 1000);
    q.remove(idle);
    q.add(busy, 2000);
    assert.equal(q.timers(), 2);
    q.trim();
    assert.equal(q.timers(), 1);
    assert.equal(clock.manual.pendingTimers(), 1);
  });

  it('fires late, never early, when the clock steps back; a reading that is not a number fires', async () => {
    const clock = new SteppableClock(false);
    const q = new TimeoutQueue(clock);
    const fired: Array<{ name: string; at: number }> = [];
    q.add(new Entry('first', fired, clock), 100); // due at 100
    clock.offset = -30; // the clock steps back 30 ms
    q.add(new Entry('second', fired, clock), 100); // by the reading due at 70: kept behind 'first'
    await clock.manual.advance(99);
    assert.equal(fired.length, 0, 'neither early');
    await clock.manual.advance(31);
    assert.deepEqual(
      fired.map((f) => f.name),
      ['first', 'second'],
    );

    const nan = new SteppableClock(false);
    const q2 = new TimeoutQueue(nan);
    const fired2: Array<{ name: string; at: number }> = [];
    q2.add(new Entry('x', fired2, nan), 50);
    nan.offset = Number.NaN;
    await nan.manual.advance(50);
    assert.deepEqual(
      fired2.map((f) => f.name),
      ['x'],
      'fails closed: the request times out',
    );
  });

  it('an entry that times out may queue another; both time out', async () => {
    const clock = new ManualClock();
    const q = new TimeoutQueue(clock);
    const names: string[] = [];
    class Chain extends Timed {
      constructor(private readonly n: number) {
        super();
      }
      onTimeout(): void {
        names.push(`t${this.n}@${clock.now()}`);
        if (this.n < 3) q.add(new Chain(this.n + 1), 10);
      }
    }
    q.add(new Chain(1), 10);
    await clock.advance(100);
    assert.deepEqual(names, ['t1@10', 't2@20', 't3@30']);
    assert.equal(clock.pendingTimers(), 0);
  });

  it('with the system clock, times out a request that never answers', async () => {
    const q = new TimeoutQueue(systemClock);
    const settled = await boundedRequest(q, 20, undefined, () => new Promise<never>(() => {}));
    assert.equal(settled.ok, false);
    assert.equal(!settled.ok && settled.timedOut, true);
  });

  it('with the system clock, an idle timer does not keep the process alive', async () => {
    // A child adds and removes a request with a 60 s timeout; it must exit at once, not in 60 s.
    const module = fileURLToPath(
      new URL('../../../src/core/runtime/timeout-queue.js', import.meta.url),
    );
    const clockModule = fileURLToPath(
      new URL('../../../src/core/runtime/clock.js', import.meta.url),
    );
    const code = `
      const { TimeoutQueue, Timed } = await import(${JSON.stringify(module)});
      const { systemClock } = await import(${JSON.stringify(clockModule)});
      class E extends Timed { onTimeout() { console.log('fired'); } }
      const q = new TimeoutQueue(systemClock);
      const e = new E();
      q.add(e, 60000);
      q.remove(e);
      if (q.timers() !== 1) throw new Error('expected an idle timer');
      console.log('idle');
    `;
    const started = Date.now();
    const child = spawn(process.execPath, ['--input-type=module', '-e', code], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exitCode = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    assert.equal(exitCode, 0);
    assert.equal(out.trim(), 'idle');
    assert.ok(Date.now() - started < 30_000, 'the idle 60 s timer did not hold the process');
  });
});
