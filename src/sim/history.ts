/**
 * The history format: one JSON object per line, written by the simulation, by the
 * real-process fault tests, and by anyone's own system, and read by the checker
 * (`leasehold check history.jsonl`). docs/history-format.md is the reference.
 *
 * Times (`t`, `at`, `grantedAt`, `expiresAt`, `deadline`) are milliseconds on ONE time scale
 * per history (the harness's clock); an emitter that cannot put a value on that scale leaves
 * it out, and the checks that need it report "not checked". Tokens are decimal strings.
 */

import { LIMITS } from '../core/validate.js';

/** An operation on a lease, as the client invoked it and saw its outcome. */
export type ClientOpType = 'acquire' | 'renew' | 'release';

/** Phases of a client operation: `invoke` first, then exactly one outcome (or none: `:info`). */
export type ClientPhase =
  'invoke' | 'ok' | 'busy' | 'unavailable' | 'lost' | 'not_owner' | 'released';

/** A client-side lease operation event. */
export interface ClientEvent {
  readonly type: ClientOpType;
  readonly phase: ClientPhase;
  /** Harness time of the event. */
  readonly t: number;
  /** Who did it (a process, worker or client name). */
  readonly proc: string;
  /** Pairs `invoke` with its outcome; unique per operation in the history. */
  readonly op: string;
  readonly key: string;
  /** The lease's token (decimal string), on `ok` and on renew/release. */
  readonly token?: string;
  /** A label for the lease (any stable id; never needs to be the secret lease id). */
  readonly lease?: string;
  readonly ttlMs?: number;
  /** The client's own conservative deadline for the lease after this event (harness scale). */
  readonly deadline?: number;
  /** The store's expiry for the lease as the store reported it (harness scale), if known. */
  readonly storeExpiresAt?: number;
  /**
   * `client` when `storeExpiresAt` is the client's own observation (its clock when the answer
   * arrived, plus the TTL) because the store states no expiry instant (etcd). Absent: the
   * store's clock.
   */
  readonly storeExpiryObservedBy?: 'client';
}

/** What the store itself did, observed at the store (simulation, or a store that reports it). */
export interface StoreEvent {
  readonly type: 'store';
  readonly op: string;
  readonly action: 'grant' | 'busy' | 'renewed' | 'renew_lost' | 'released' | 'not_owner';
  /** Store time of the action (harness scale). */
  readonly at: number;
  readonly t: number;
  readonly key: string;
  readonly lease?: string;
  readonly token?: string;
  /** The lease's expiry after the action (grant, renewed). */
  readonly expiresAt?: number;
  /**
   * The action was part of a hand-off (`releaseAndAcquire`): its release and its grant are
   * recorded as two events at the same store instant, the release first.
   */
  readonly handOff?: boolean;
}

/**
 * The store operations a lease model knows (I5). `hand_off` is `releaseAndAcquire`: a release
 * and an acquire attempt of the same key in one atomic step.
 */
export type StoreOpFunction = 'acquire' | 'renew' | 'release' | 'hand_off';

/**
 * Phases of a store operation: `invoke`, then one answer — acquire and hand_off `acquired` /
 * `busy`, renew `renewed` / `lost`, release `released` / `not_owner` — or `info` (timeout,
 * store unavailable: it may or may not have taken effect). No answer at all is also `info`.
 */
export type StoreOpPhase =
  'invoke' | 'acquired' | 'busy' | 'renewed' | 'lost' | 'released' | 'not_owner' | 'info';

/**
 * One request to the lease store as its caller sent it and saw it answered (I5, the W-mutex
 * shape): a single atomic step at the store, unlike the client's `acquire` events, which
 * cover waiting and retries. The linearizability check reads these.
 */
export interface StoreOpEvent {
  readonly type: 'store_op';
  readonly phase: StoreOpPhase;
  readonly f: StoreOpFunction;
  /** Harness time of the event: the request sent (`invoke`), its answer read (others). */
  readonly t: number;
  readonly proc: string;
  /** Pairs `invoke` with its answer; unique per operation in the history. */
  readonly op: string;
  readonly key: string;
  /**
   * The acquisition's label: the lease id the request carries (required on `invoke`). For a
   * hand_off, the lease it grants.
   */
  readonly lease?: string;
  /** Renew/release `invoke`: the token the request carries. `acquired`: the token granted. */
  readonly token?: string;
  /** Acquire/renew `invoke`: the TTL asked for. */
  readonly ttlMs?: number;
  /**
   * The store's own clock (the one it decides expiry by) at this event, on the history's
   * scale: on `invoke` a lower bound, on the answer an upper bound, of the store time at which
   * the operation took effect.
   */
  readonly storeAt?: number;
  /** On `info`: what went wrong. */
  readonly error?: string;
  /** Hand_off `invoke`: the label of the lease it releases. */
  readonly releaseLease?: string;
  /** Hand_off `invoke`: the token of the lease it releases. */
  readonly releaseToken?: string;
  /** Hand_off answer (`acquired` / `busy`): what its release did. */
  readonly released?: 'released' | 'not_owner';
  /**
   * Acquire and hand_off `invoke`: the token block the request asked for
   * (`StoreAcquireRequest.tokenBlock`, decision 007), an integer from 2 to 64; absent means 1.
   * A grant of token `t` with block `b` keeps `t` as the holder's token and makes every later
   * grant for the key greater than `t + b − 1`.
   */
  readonly tokenBlock?: number;
}

/** A client's lease ended on its side (signal fired). */
export interface LostEvent {
  readonly type: 'lost';
  readonly t: number;
  readonly proc: string;
  readonly key: string;
  readonly token: string;
  readonly lease?: string;
  readonly reason: string;
}

/** A fenced write at the protected resource, as the client sent it and saw it answered. */
export interface WriteEvent {
  readonly type: 'write';
  readonly phase: 'invoke' | 'ok' | 'stale' | 'duplicate' | 'unknown';
  readonly t: number;
  readonly proc: string;
  readonly op: string;
  /** The fencing scope at the resource. */
  readonly resource: string;
  readonly token: string;
  /** What the write adds (for the lost-write check, I6). */
  readonly value?: string;
  /** False when the write was sent without a token check (the unfenced control arm). */
  readonly fenced?: boolean;
}

/** What the resource did with a write, observed at the resource. */
export interface ResourceEvent {
  readonly type: 'resource';
  readonly action: 'applied' | 'rejected' | 'duplicate';
  readonly t: number;
  readonly op: string;
  readonly resource: string;
  readonly token: string;
  /** The high-water mark after the action. */
  readonly hwm?: string;
}

/** The resource's final contents, read after the run (for I6). */
export interface FinalEvent {
  readonly type: 'final';
  readonly t: number;
  readonly resource: string;
  readonly values: readonly string[];
  readonly hwm?: string;
}

/** A fault the harness injected; some make I3/I4 failures expected. */
export interface FaultEvent {
  readonly type: 'fault';
  readonly t: number;
  readonly fault: string;
  readonly proc?: string;
  readonly detail?: string;
}

/** Run metadata; optional, at most one, usually first. */
export interface MetaEvent {
  readonly type: 'meta';
  readonly t?: number;
  readonly version: 1;
  readonly source?: string;
  readonly seed?: string;
  readonly ttlMs?: number;
  /** Enables the liveness check: a waiting acquirer gets a free key within this bound. */
  readonly livenessBoundMs?: number;
  /**
   * How far store-side times may be off (ms), e.g. when the store's expiry is reported as a
   * wall-clock approximation of a monotonic deadline. Overlaps and slack within it are not
   * violations.
   */
  readonly timeToleranceMs?: number;
  readonly scenario?: string;
  /**
   * Store operations without `storeAt` take their store-time window from `t`: right when the
   * store's clock runs at the rate of the history's clock (any fixed offset is fine: the lease
   * model compares only differences of store times).
   */
  readonly storeTimeFromT?: boolean;
}

/** One line of a history. */
export type HistoryEvent =
  | ClientEvent
  | StoreEvent
  | StoreOpEvent
  | LostEvent
  | WriteEvent
  | ResourceEvent
  | FinalEvent
  | FaultEvent
  | MetaEvent;

/**
 * Faults under which I3 (store-clock exclusivity) is expected to fail; I1 must then catch
 * the consequences.
 */
export const I3_EXPECTED_FAULTS: ReadonlySet<string> = new Set([
  'store_clock_jump',
  'store_clock_back',
  'failover',
  'store_restart_unsynced',
  'restore',
  'eviction',
]);

/**
 * Faults under which I5 (linearizability against the lease model, by the store's own clock)
 * is expected to fail: the store loses state or its clock goes back. A store clock jumping
 * forward is not here — by its own clock the store is still a linearizable lease.
 */
export const I5_EXPECTED_FAULTS: ReadonlySet<string> = new Set([
  'store_clock_back',
  'failover',
  'store_restart_unsynced',
  'restore',
  'eviction',
]);

/** Faults under which I4 (client conservatism) is expected to fail for the named proc. */
export const I4_EXPECTED_FAULTS: ReadonlySet<string> = new Set([
  'client_clock_jump',
  'client_clock_rate',
  ...I3_EXPECTED_FAULTS,
]);

/** A line that is not a valid history event; `line` is 1-based. */
export class HistoryParseError extends Error {
  constructor(
    readonly line: number,
    message: string,
  ) {
    super(`line ${line}: ${message}`);
    this.name = 'HistoryParseError';
  }
}

const CLIENT_TYPES = new Set(['acquire', 'renew', 'release']);
const CLIENT_PHASES = new Set([
  'invoke',
  'ok',
  'busy',
  'unavailable',
  'lost',
  'not_owner',
  'released',
]);
const STORE_ACTIONS = new Set(['grant', 'busy', 'renewed', 'renew_lost', 'released', 'not_owner']);
const STORE_OP_ANSWERS: Readonly<Record<StoreOpFunction, ReadonlySet<string>>> = {
  acquire: new Set(['acquired', 'busy', 'info']),
  renew: new Set(['renewed', 'lost', 'info']),
  release: new Set(['released', 'not_owner', 'info']),
  hand_off: new Set(['acquired', 'busy', 'info']),
};
const WRITE_PHASES = new Set(['invoke', 'ok', 'stale', 'duplicate', 'unknown']);
const RESOURCE_ACTIONS = new Set(['applied', 'rejected', 'duplicate']);
const TOKEN_RE = /^[1-9][0-9]{0,18}$/;
/** The largest `store_op` `tokenBlock` (`LIMITS.maxTokenBlock`). */
const MAX_TOKEN_BLOCK = LIMITS.maxTokenBlock;

/**
 * Parses JSON-lines history text. Blank lines and lines starting with `#` are skipped.
 * Throws {@link HistoryParseError} naming the first bad line: a checker that guessed at a
 * malformed history could pass a broken system.
 */
export function parseHistory(text: string): HistoryEvent[] {
  const out: HistoryEvent[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!.trim();
    if (raw === '' || raw.startsWith('#')) continue;
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch (err) {
      throw new HistoryParseError(i + 1, `not JSON: ${(err as Error).message}`);
    }
    out.push(validateEvent(value, i + 1));
  }
  return out;
}

/** Serialises events as JSON lines (one per line, trailing newline). */
export function formatHistory(events: readonly HistoryEvent[]): string {
  return events.map((e) => JSON.stringify(e)).join('\n') + (events.length > 0 ? '\n' : '');
}

function validateEvent(value: unknown, line: number): HistoryEvent {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new HistoryParseError(line, 'must be a JSON object');
  const e = value as Record<string, unknown>;
  const fail = (msg: string): never => {
    throw new HistoryParseError(line, msg);
  };
  const str = (f: string, optional = false): void => {
    if (e[f] === undefined && optional) return;
    if (typeof e[f] !== 'string' || e[f] === '') fail(`"${f}" must be a non-empty string`);
  };
  const num = (f: string, optional = false): void => {
    if (e[f] === undefined && optional) return;
    if (typeof e[f] !== 'number' || !Number.isFinite(e[f])) fail(`"${f}" must be a finite number`);
  };
  const token = (f: string, optional = false): void => {
    if (e[f] === undefined && optional) return;
    if (typeof e[f] !== 'string' || !TOKEN_RE.test(e[f]) || BigInt(e[f]) > 9223372036854775807n)
      fail(`"${f}" must be a decimal string of a positive 64-bit integer`);
  };
  const type = e.type;
  if (typeof type !== 'string') return fail('"type" must be a string');
  if (CLIENT_TYPES.has(type)) {
    if (typeof e.phase !== 'string' || !CLIENT_PHASES.has(e.phase))
      fail(`"phase" must be one of ${[...CLIENT_PHASES].join(', ')}`);
    num('t');
    str('proc');
    str('op');
    str('key');
    token('token', type === 'acquire' && e.phase !== 'ok');
    str('lease', true);
    num('ttlMs', true);
    num('deadline', true);
    num('storeExpiresAt', true);
    if (e.storeExpiryObservedBy !== undefined && e.storeExpiryObservedBy !== 'client')
      fail('"storeExpiryObservedBy" must be "client" when present');
  } else if (type === 'store') {
    if (typeof e.action !== 'string' || !STORE_ACTIONS.has(e.action))
      fail(`"action" must be one of ${[...STORE_ACTIONS].join(', ')}`);
    str('op');
    num('at');
    num('t');
    str('key');
    str('lease', true);
    token('token', e.action === 'busy');
    num('expiresAt', !(e.action === 'grant' || e.action === 'renewed'));
    if (e.handOff !== undefined && typeof e.handOff !== 'boolean')
      fail('"handOff" must be a boolean');
  } else if (type === 'store_op') {
    const f = e.f;
    if (f !== 'acquire' && f !== 'renew' && f !== 'release' && f !== 'hand_off')
      return fail('"f" must be one of acquire, renew, release, hand_off');
    if (typeof e.phase !== 'string' || (e.phase !== 'invoke' && !STORE_OP_ANSWERS[f].has(e.phase)))
      fail(`"phase" of a ${f} must be invoke or one of ${[...STORE_OP_ANSWERS[f]].join(', ')}`);
    num('t');
    str('proc');
    str('op');
    str('key');
    const invoke = e.phase === 'invoke';
    const grants = f === 'acquire' || f === 'hand_off';
    str('lease', !invoke);
    token('token', !((invoke && !grants) || e.phase === 'acquired'));
    num('ttlMs', !(invoke && f !== 'release'));
    str('releaseLease', !(invoke && f === 'hand_off'));
    token('releaseToken', !(invoke && f === 'hand_off'));
    if (f === 'hand_off' && !invoke && e.phase !== 'info') {
      if (e.released !== 'released' && e.released !== 'not_owner')
        fail('"released" of a hand_off answer must be released or not_owner');
    }
    if (e.ttlMs !== undefined && !((e.ttlMs as number) > 0)) fail('"ttlMs" must be positive');
    if (e.tokenBlock !== undefined) {
      if (!(invoke && grants))
        fail('"tokenBlock" belongs only on the invoke of an acquire or hand_off');
      const b = e.tokenBlock;
      if (typeof b !== 'number' || !Number.isInteger(b) || b < 2 || b > MAX_TOKEN_BLOCK)
        fail(`"tokenBlock" must be an integer from 2 to ${MAX_TOKEN_BLOCK} (leave it out for 1)`);
    }
    num('storeAt', true);
    str('error', true);
  } else if (type === 'lost') {
    num('t');
    str('proc');
    str('key');
    token('token');
    str('lease', true);
    str('reason');
  } else if (type === 'write') {
    if (typeof e.phase !== 'string' || !WRITE_PHASES.has(e.phase))
      fail(`"phase" must be one of ${[...WRITE_PHASES].join(', ')}`);
    num('t');
    str('proc');
    str('op');
    str('resource');
    token('token');
    if (e.value !== undefined && typeof e.value !== 'string') fail('"value" must be a string');
    if (e.fenced !== undefined && typeof e.fenced !== 'boolean') fail('"fenced" must be a boolean');
  } else if (type === 'resource') {
    if (typeof e.action !== 'string' || !RESOURCE_ACTIONS.has(e.action))
      fail(`"action" must be one of ${[...RESOURCE_ACTIONS].join(', ')}`);
    num('t');
    str('op');
    str('resource');
    token('token');
    token('hwm', true);
  } else if (type === 'final') {
    num('t');
    str('resource');
    if (!Array.isArray(e.values) || !e.values.every((v) => typeof v === 'string'))
      fail('"values" must be an array of strings');
    token('hwm', true);
  } else if (type === 'fault') {
    num('t');
    str('fault');
    str('proc', true);
    str('detail', true);
  } else if (type === 'meta') {
    if (e.version !== 1) fail('"version" must be 1');
    num('t', true);
    num('ttlMs', true);
    num('livenessBoundMs', true);
    num('timeToleranceMs', true);
    str('seed', true);
    str('source', true);
    str('scenario', true);
    if (e.storeTimeFromT !== undefined && typeof e.storeTimeFromT !== 'boolean')
      fail('"storeTimeFromT" must be a boolean');
  } else {
    fail(`unknown "type" ${JSON.stringify(type)}`);
  }
  return e as unknown as HistoryEvent;
}

/**
 * Collects history events in memory, in the order they happen. The simulation and the fault
 * harness record through it; `lines()` gives the JSON-lines text.
 */
export class HistoryRecorder {
  readonly events: HistoryEvent[] = [];
  private nextOp = 1;

  /** A fresh operation id: `prefix` + a counter, deterministic in recording order. */
  newOp(prefix = 'op'): string {
    return `${prefix}${this.nextOp++}`;
  }

  record(event: HistoryEvent): void {
    this.events.push(event);
  }

  lines(): string {
    return formatHistory(this.events);
  }
}
