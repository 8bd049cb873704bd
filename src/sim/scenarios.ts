import type { CheckReport } from '../check/checker.js';
import type { HistoryEvent } from '../history/events.js';
import type { Lease } from '../core/lease.js';
import { SimWorld, type SimWorker } from './world.js';

/** The outcome of one named scenario: its history, verdict and the facts it is about. */
export interface ScenarioResult {
  readonly name: string;
  readonly seed: number;
  readonly history: readonly HistoryEvent[];
  readonly text: string;
  readonly report: CheckReport;
  readonly facts: Readonly<Record<string, string | number | boolean | undefined>>;
}

const CALM = { minDelayMs: 1, maxDelayMs: 5, dropRequest: 0, dropReply: 0, duplicate: 0 };

function done(
  world: SimWorld,
  name: string,
  seed: number,
  facts: ScenarioResult['facts'],
): ScenarioResult {
  const { history, report, text } = world.finish();
  return { name, seed, history, text, report, facts };
}

function spawn(fn: () => Promise<unknown>): void {
  fn().catch(() => undefined);
}

/**
 * F1 from a seed: A takes the lease (TTL from the seed), works, checks it, then freezes for
 * TTL × U(1.1, 3) before its write leaves; B waits, takes over at expiry and writes; A's write
 * lands last. Facts: `aWrite` (applied | stale_fence), `bWrite`, tokens.
 */
export async function pauseScenario(seed: number, fencing: boolean): Promise<ScenarioResult> {
  const world = new SimWorld({ seed, fencing, link: CALM });
  const r = world.random.fork('plan');
  const ttlMs = r.int(10, 50) * 100;
  const pauseMs = Math.floor(ttlMs * (1.1 + r.next() * 1.9));
  world.meta({ source: 'leasehold-sim', scenario: 'pause', ttlMs });
  const a = world.addWorker('A');
  const b = world.addWorker('B');
  const facts: Record<string, string | number | boolean | undefined> = { ttlMs, pauseMs };
  spawn(async () => {
    const out = await world.locksetOnce(a, {
      key: 'job',
      resource: 'result',
      ttlMs,
      waitMs: 0,
      workMs: r.int(0, Math.floor(ttlMs / 2)),
      checkBeforeWrite: true,
      beforeWrite: () => {
        world.fault('pause', 'A', `${pauseMs}ms`);
        return a.proc.freeze(pauseMs);
      },
    });
    if (out.status === 'wrote') {
      facts.aWrite = out.result;
      facts.aToken = out.token.toString();
    }
  });
  spawn(async () => {
    await b.proc.sleep(1 + r.int(0, Math.floor(ttlMs / 4)));
    const out = await world.locksetOnce(b, {
      key: 'job',
      resource: 'result',
      ttlMs,
      waitMs: 4 * ttlMs,
      workMs: r.int(0, Math.floor(ttlMs / 20)),
      checkBeforeWrite: true,
    });
    if (out.status === 'wrote') {
      facts.bWrite = out.result;
      facts.bToken = out.token.toString();
    }
  });
  await world.advance(6 * ttlMs);
  return done(world, 'pause', seed, facts);
}

/**
 * F3: A's write is held in the network for 2 × TTL while A is also cut off from the store (its
 * renewals hang); B takes over at expiry and writes; then A's write arrives.
 */
export async function delayedWriteScenario(
  seed: number,
  fencing: boolean,
): Promise<ScenarioResult> {
  const world = new SimWorld({ seed, fencing, link: CALM });
  const ttlMs = 2000;
  world.meta({ source: 'leasehold-sim', scenario: 'delayed_write', ttlMs });
  const a = world.addWorker('A');
  const b = world.addWorker('B');
  const facts: Record<string, string | number | boolean | undefined> = {};
  spawn(async () => {
    const out = await world.locksetOnce(a, {
      key: 'job',
      resource: 'result',
      ttlMs,
      waitMs: 0,
      workMs: 100,
      checkBeforeWrite: true,
      beforeWrite: () => {
        world.fault('delay_write', 'A', `${2 * ttlMs}ms`);
        world.network.delayNext('A', 'write', 2 * ttlMs);
        world.fault('partition', 'A', 'store');
        world.network.holdRequests('A', 'store', world.clock.now() + 3 * ttlMs);
      },
    });
    if (out.status === 'wrote') facts.aWrite = out.result;
  });
  spawn(async () => {
    await b.proc.sleep(50);
    const out = await world.locksetOnce(b, {
      key: 'job',
      resource: 'result',
      ttlMs,
      waitMs: 4 * ttlMs,
      workMs: 10,
      checkBeforeWrite: true,
    });
    if (out.status === 'wrote') facts.bWrite = out.result;
  });
  await world.advance(6 * ttlMs);
  return done(world, 'delayed_write', seed, facts);
}

/**
 * F5: A's renewal is applied at the store but its answer is lost. The client must treat it as
 * unknown (`unavailable`), retry, and keep the lease; the store keeps one lease, one token.
 */
export async function lostRenewReplyScenario(seed: number): Promise<ScenarioResult> {
  const world = new SimWorld({ seed, fencing: true, link: CALM });
  const ttlMs = 3000;
  world.meta({ source: 'leasehold-sim', scenario: 'lost_renew_reply', ttlMs });
  const a = world.addWorker('A', { requestTimeoutMs: 1000 });
  const facts: Record<string, string | number | boolean | undefined> = {};
  world.network.dropNextReply('A', 'renew', 1);
  world.fault('drop_reply', 'A', 'renew');
  spawn(async () => {
    const got = await world.acquire(a, 'job', { ttlMs, waitMs: 0, renewEveryMs: 1000 });
    if (typeof got === 'string') return;
    await a.proc.sleep(4 * ttlMs);
    facts.validAfter = got.isValid();
    facts.status = got.status;
    await world.release(a, got);
  });
  await world.advance(6 * ttlMs);
  return done(world, 'lost_renew_reply', seed, facts);
}

/**
 * F2: A sends its acquire and freezes (2 × TTL) before reading the reply. On waking the grant
 * is older than its validity window: the client must report `unavailable`, release the grant
 * (owner-checked), and never act on it; B gets the key.
 */
export async function slowAcquireReplyScenario(
  seed: number,
  fencing: boolean,
): Promise<ScenarioResult> {
  const world = new SimWorld({ seed, fencing, link: { ...CALM, minDelayMs: 3, maxDelayMs: 5 } });
  const ttlMs = 2000;
  world.meta({ source: 'leasehold-sim', scenario: 'slow_acquire_reply', ttlMs });
  const a = world.addWorker('A');
  const b = world.addWorker('B');
  const facts: Record<string, string | number | boolean | undefined> = {};
  world.clock.setTimeout(() => {
    world.fault('pause', 'A', `${2 * ttlMs}ms`);
    void a.proc.freeze(2 * ttlMs);
  }, 1);
  spawn(async () => {
    const out = await world.locksetOnce(a, {
      key: 'job',
      resource: 'result',
      ttlMs,
      waitMs: 0,
      workMs: 10,
      checkBeforeWrite: false,
    });
    facts.aOutcome = out.status === 'not_acquired' ? out.result : out.status;
  });
  spawn(async () => {
    await b.proc.sleep(20);
    const out = await world.locksetOnce(b, {
      key: 'job',
      resource: 'result',
      ttlMs,
      waitMs: 4 * ttlMs,
      workMs: 10,
      checkBeforeWrite: true,
    });
    if (out.status === 'wrote') {
      facts.bWrite = out.result;
      facts.bToken = out.token.toString();
    }
  });
  await world.advance(6 * ttlMs);
  return done(world, 'slow_acquire_reply', seed, facts);
}

/**
 * Client clock faults (F9/F10): `jump` moves A's monotonic clock by `amountMs` while it holds
 * the lease (forward: the lease must end early locally; backward: the client fails closed);
 * `rate` runs A's clock at `amount` × real speed (a slow clock makes A believe in its lease
 * too long: only the fence saves the write). A holds one lease without renewal and writes once.
 */
export async function clientClockScenario(
  seed: number,
  fencing: boolean,
  fault: { kind: 'jump'; amountMs: number } | { kind: 'rate'; rate: number },
): Promise<ScenarioResult> {
  const world = new SimWorld({ seed, fencing, link: CALM });
  const ttlMs = 2000;
  world.meta({ source: 'leasehold-sim', scenario: `client_clock_${fault.kind}`, ttlMs });
  const a = world.addWorker('A');
  const b = world.addWorker('B');
  const facts: Record<string, string | number | boolean | undefined> = {};
  if (fault.kind === 'rate') {
    world.fault('client_clock_rate', 'A', `x${fault.rate}`);
    a.proc.setRate(fault.rate);
  }
  let lease: Lease | undefined;
  spawn(async () => {
    const got = await world.acquire(a, 'job', { ttlMs, waitMs: 0, autoRenew: false });
    if (typeof got === 'string') return;
    lease = got;
    const seen = await world.read(a, 'result', got.token);
    // A believes it may work for 90% of the TTL — by its own clock.
    await a.proc.sleep(Math.floor(ttlMs * 0.9));
    facts.validBeforeWrite = got.isValid();
    facts.lossReason = got.lossReason;
    if (got.isValid()) {
      facts.aWrite = await world.write(a, 'result', got.token, [...seen.values, 'A'], 'A');
    }
    await world.release(a, got);
  });
  if (fault.kind === 'jump') {
    world.clock.setTimeout(() => {
      world.fault('client_clock_jump', 'A', `${fault.amountMs}ms`);
      a.proc.jump(fault.amountMs);
      facts.validAfterJump = lease?.isValid();
      facts.lossReason = lease?.lossReason;
    }, 500);
  }
  spawn(async () => {
    await b.proc.sleep(10);
    const got = await world.acquire(b, 'job', { ttlMs, waitMs: 4 * ttlMs });
    if (typeof got === 'string') return;
    facts.bTakenAt = world.clock.now();
    const seen = await world.read(b, 'result', got.token);
    facts.bWrite = await world.write(b, 'result', got.token, [...seen.values, 'B'], 'B');
    await world.release(b, got);
  });
  await world.advance(6 * ttlMs);
  return done(world, `client_clock_${fault.kind}`, seed, facts);
}

/**
 * Lease too short or too long for the system it runs in. A holder keeps the lease (renewing
 * every TTL/3) over a network with 20–100 ms delays and a 250 ms GC pause every second; a
 * standby waits. Facts: `handovers` (grants after the first while the holder was alive and
 * wanted it) and, when `crashAtMs` is set, `recoveryMs` from the holder's crash to the
 * standby's grant.
 */
export async function leaseLengthScenario(
  seed: number,
  ttlMs: number,
  options: { crashAtMs?: number; durationMs: number },
): Promise<ScenarioResult> {
  const world = new SimWorld({
    seed,
    fencing: true,
    link: { minDelayMs: 20, maxDelayMs: 100, dropRequest: 0, dropReply: 0, duplicate: 0 },
  });
  world.meta({ source: 'leasehold-sim', scenario: 'lease_length', ttlMs });
  const holder = world.addWorker('holder');
  const standby = world.addWorker('standby');
  const facts: Record<string, string | number | boolean | undefined> = { ttlMs };
  let handovers = 0;
  let crashedAt: number | undefined;
  const keep = async (w: SimWorker, onGrant: () => void): Promise<void> => {
    for (;;) {
      const got = await world.acquire(w, 'job', { ttlMs, waitMs: 10 * ttlMs + options.durationMs });
      if (typeof got === 'string') continue;
      onGrant();
      const seen = await world.read(w, 'result', got.token);
      const value = `${w.name}@${world.clock.now()}`;
      await world.write(w, 'result', got.token, [...seen.values, value], value);
      // Hold until lost (the holder never gives it up on purpose).
      await new Promise<void>((resolve) =>
        got.signal.addEventListener('abort', () => resolve(), { once: true }),
      );
    }
  };
  let holderGrants = 0;
  spawn(() => keep(holder, () => holderGrants++));
  spawn(async () => {
    await standby.proc.sleep(50);
    await keep(standby, () => {
      handovers++;
      if (crashedAt !== undefined && facts.recoveryMs === undefined)
        facts.recoveryMs = world.clock.now() - crashedAt;
    });
  });
  for (let t = 1000; t < options.durationMs; t += 1000) {
    world.clock.setTimeout(() => {
      if (holder.proc.crashed || holder.proc.frozen) return;
      world.fault('pause', 'holder', '250ms');
      void holder.proc.freeze(250);
    }, t);
  }
  if (options.crashAtMs !== undefined) {
    world.clock.setTimeout(() => {
      crashedAt = world.clock.now();
      world.fault('crash', 'holder');
      holder.proc.crash();
    }, options.crashAtMs);
  }
  await world.advance(options.durationMs);
  facts.handovers = handovers;
  facts.holderGrants = holderGrants;
  return done(world, 'lease_length', seed, facts);
}
