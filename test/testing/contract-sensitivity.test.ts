import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { systemClock } from '../../src/core/runtime/clock.js';
import type {
  StoreAcquireRequest,
  StoreAcquireResult,
  StoreLeaseRef,
  StoreReleaseResult,
  StoreRenewResult,
  Unwatch,
} from '../../src/core/store.js';
import { MemoryLeaseState, MemoryLeaseStore } from '../../src/stores/memory/store.js';
import { storeContractCases as contractCases } from '../../src/testing/store-contract/index.js';
import type { StoreHarness } from '../contract/harness.js';

/** Stores that each break one rule of the contract: the suite must catch every one. */
class NeverIncrementsTokens extends MemoryLeaseStore {
  constructor(private readonly s: MemoryLeaseState) {
    super({ state: s });
  }
  override async tryAcquire(r: StoreAcquireRequest): Promise<StoreAcquireResult> {
    const answer = await super.tryAcquire(r);
    if (answer.status !== 'acquired') return answer;
    this.s.rows.get(r.key)!.lastToken = 1n;
    return { status: 'acquired', token: 1n };
  }
}

class RevivesExpiredLeases extends MemoryLeaseStore {
  constructor(private readonly s: MemoryLeaseState) {
    super({ state: s });
  }
  override renew(lease: StoreLeaseRef & { ttlMs: number }): Promise<StoreRenewResult> {
    const row = this.s.rows.get(lease.key);
    if (row?.leaseId === lease.leaseId) {
      row.expiresAt = systemClock.now() + lease.ttlMs;
      return Promise.resolve({ status: 'renewed' });
    }
    return Promise.resolve({ status: 'lost' });
  }
}

class ReleasesUnconditionally extends MemoryLeaseStore {
  constructor(private readonly s: MemoryLeaseState) {
    super({ state: s });
  }
  override release(lease: StoreLeaseRef): Promise<StoreReleaseResult> {
    const row = this.s.rows.get(lease.key);
    if (row === undefined) return Promise.resolve({ status: 'not_owner' });
    row.leaseId = undefined;
    row.expiresAt = Number.NEGATIVE_INFINITY;
    return Promise.resolve({ status: 'released' });
  }
}

class ExpiresEarly extends MemoryLeaseStore {
  constructor(s: MemoryLeaseState) {
    super({ state: s });
  }
  override tryAcquire(r: StoreAcquireRequest): Promise<StoreAcquireResult> {
    return super.tryAcquire({ ...r, ttlMs: Math.floor(r.ttlMs / 2) });
  }
}

class NeverNotifies extends MemoryLeaseStore {
  constructor(s: MemoryLeaseState) {
    super({ state: s });
  }
  override watch(): Promise<Unwatch> {
    return Promise.resolve(() => {});
  }
}

class ReportsOutageAsBusy extends MemoryLeaseStore {
  private down = false;
  constructor(s: MemoryLeaseState) {
    super({ state: s });
  }
  override tryAcquire(r: StoreAcquireRequest): Promise<StoreAcquireResult> {
    if (this.down) {
      return Promise.resolve({
        status: 'busy',
        holder: { ownerId: '?', token: 1n, remainingMs: 1, leaseIdPrefix: '', value: undefined },
        retryAfterMs: 1,
      });
    }
    return super.tryAcquire(r);
  }
  override close(): Promise<void> {
    this.down = true;
    return Promise.resolve();
  }
}

function harnessOf(make: (s: MemoryLeaseState) => MemoryLeaseStore): StoreHarness {
  const state = new MemoryLeaseState();
  return {
    name: 'broken',
    open: () => Promise.resolve(make(state)),
    teardown: () => Promise.resolve(),
  };
}

/**
 * The assertion a case must fail with to count as catching a broken store: an
 * `AssertionError` whose message matches, or whose actual/expected pair is the one given. Any
 * other error (a TypeError, a timeout) is a case broken in itself, not a catch.
 */
interface Expected {
  readonly message?: RegExp;
  readonly actual?: unknown;
  readonly expected?: unknown;
}

const BROKEN: Array<
  [string, (s: MemoryLeaseState) => MemoryLeaseStore, Array<[string, Expected]>]
> = [
  [
    'a store that never increments tokens',
    (s) => new NeverIncrementsTokens(s),
    [
      ['tokens strictly increase', { message: /^grant \d+ has token 1 after 1$/ }],
      [
        'tokens keep increasing across a store re-open',
        { message: /the counter survives the re-open/ },
      ],
      ['keeps the token counter', { message: /^the grant after a release has a greater token$/ }],
    ],
  ],
  [
    'a store that revives expired leases on renew',
    (s) => new RevivesExpiredLeases(s),
    [['stays lost', { message: /the store must not revive an expired lease/, actual: 'renewed' }]],
  ],
  [
    'a store that releases without checking lease id and token',
    (s) => new ReleasesUnconditionally(s),
    [
      ['release is conditional', { actual: 'released', expected: 'not_owner' }],
      [
        'a stale renew or release never touches the new holder',
        { actual: 'released', expected: 'not_owner' },
      ],
    ],
  ],
  [
    'a store that expires leases before their TTL',
    (s) => new ExpiresEarly(s),
    [['only after the TTL has run out', { message: /^B got the key [\d.]+ms after A asked for/ }]],
  ],
  [
    'a store whose watch never fires',
    (s) => new NeverNotifies(s),
    [['woken by the release itself', { message: /^B took \d+ms to notice the release$/ }]],
  ],
  [
    'a store that reports an outage as busy',
    (s) => new ReportsOutageAsBusy(s),
    [['never busy', { actual: 'busy', expected: 'unavailable' }]],
  ],
];

function isExpected(e: unknown, want: Expected): boolean {
  if (!(e instanceof assert.AssertionError)) return false;
  if (want.message !== undefined && !want.message.test(e.message)) return false;
  if ('actual' in want && e.actual !== want.actual) return false;
  if ('expected' in want && e.expected !== want.expected) return false;
  return true;
}

describe('the conformance suite can fail', () => {
  for (const [what, make, cases] of BROKEN) {
    for (const [fragment, want] of cases) {
      const c = contractCases.find((x) => x.name.includes(fragment));
      it(`catches ${what} in “${fragment}”`, { timeout: 60_000 }, async () => {
        assert.ok(c, `no contract case matches "${fragment}"`);
        let caught: unknown;
        try {
          await c.run(harnessOf(make), { skip: (r) => assert.fail(`the case skipped: ${r}`) });
        } catch (e) {
          caught = e;
        }
        assert.ok(caught !== undefined, `${what} passed "${c.name}"`);
        assert.ok(
          isExpected(caught, want),
          `"${c.name}" failed on ${what}, but not with the assertion it is meant to make: ${
            caught instanceof Error ? `${caught.name}: ${caught.message}` : JSON.stringify(caught)
          }`,
        );
      });
    }
  }
});
