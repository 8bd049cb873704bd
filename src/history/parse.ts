/**
 * Reading and writing the history format (docs/history-format.md): JSON lines in, checked
 * events out, and back. The event types are in events.ts.
 */

import { LIMITS } from '../core/validate.js';
import type { StoreOpFunction, HistoryEvent } from './events.js';

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
    if (e.limit !== undefined && !(Number.isInteger(e.limit) && (e.limit as number) > 0))
      fail('"limit" must be a positive integer');
    str('set', true);
    if (
      e.setKeys !== undefined &&
      !(
        Array.isArray(e.setKeys) &&
        e.setKeys.length > 0 &&
        e.setKeys.every((k) => typeof k === 'string' && k !== '')
      )
    )
      fail('"setKeys" must be a non-empty array of keys');
    if ((e.set === undefined) !== (e.setKeys === undefined))
      fail('"set" and "setKeys" come together');
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
    num('lockDelayMs', true);
    if (e.lockDelayMs !== undefined && (e.lockDelayMs as number) < 0)
      fail('"lockDelayMs" must not be negative');
    if (e.ignoreLockDelay !== undefined && typeof e.ignoreLockDelay !== 'boolean')
      fail('"ignoreLockDelay" must be a boolean');
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
    num('lockDelayMs', true);
    if (e.lockDelayMs !== undefined && (e.lockDelayMs as number) < 0)
      fail('"lockDelayMs" must not be negative');
    if (e.ignoreLockDelay !== undefined && typeof e.ignoreLockDelay !== 'boolean')
      fail('"ignoreLockDelay" must be a boolean');
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
  } else if (type === 'claim') {
    if (e.action !== 'applied' && e.action !== 'stale_fence')
      fail('"action" must be one of applied, stale_fence');
    num('t');
    str('proc', true);
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
