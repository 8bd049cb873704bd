import type { StoreAcquireRequest, StoreRenewRequest } from '../../core/store.js';
import type { RedisClient } from '../../drivers/redis/client.js';
import { DECIMAL_LUA, LuaScript, type ScriptArg } from '../../drivers/redis/lua-script.js';

const lua = (file: string): URL => new URL(`./scripts/${file}`, import.meta.url);

/** The lease operations that acquire, release and handoff call into, one file per operation. */
const LEASE_HOLDER_LUA = lua('lease-holder.lua');
const LEASE_ACQUIRE_LUA = lua('lease-acquire.lua');
const LEASE_RELEASE_LUA = lua('lease-release.lua');

// Redis runs a script's whole body on every call, preludes included (each `local function`
// is a new closure per call): each script gets only the preludes it calls into.
const SCRIPTS = {
  acquire: LuaScript.fromFiles(
    'acquire',
    DECIMAL_LUA,
    LEASE_HOLDER_LUA,
    LEASE_ACQUIRE_LUA,
    lua('acquire.lua'),
  ),
  renew: LuaScript.fromFiles('renew', LEASE_HOLDER_LUA, lua('renew.lua')),
  renewMany: LuaScript.fromFiles('renew-many', LEASE_HOLDER_LUA, lua('renew-many.lua')),
  release: LuaScript.fromFiles('release', LEASE_HOLDER_LUA, LEASE_RELEASE_LUA, lua('release.lua')),
  handoff: LuaScript.fromFiles(
    'handoff',
    DECIMAL_LUA,
    LEASE_HOLDER_LUA,
    LEASE_ACQUIRE_LUA,
    LEASE_RELEASE_LUA,
    lua('handoff.lua'),
  ),
  inspect: LuaScript.fromFiles('inspect', LEASE_HOLDER_LUA, lua('inspect.lua')),
  epochRaise: LuaScript.fromFiles('epoch-raise', DECIMAL_LUA, lua('epoch-raise.lua')),
} as const;

/** The Redis names of one lease key, all under the `{key}` hash tag. */
export interface LeaseKeys {
  /**
   * The lease record: one hash with the key's last token and the live holder (lease id,
   * owner, expiry in Redis TIME ms, value). It never expires, so the token never resets, and
   * being one key it is always in one Cluster slot.
   */
  readonly record: string;
  /** The pub/sub channel a release (message '') and a grant (message 'granted') publish on. */
  readonly channel: string;
}

/** What a holder looks like in a script's busy or inspect answer. */
export interface RawHolder {
  readonly ownerId: string;
  readonly token: bigint;
  readonly remainingMs: number;
  readonly leaseIdPrefix: string;
  readonly value: string | undefined;
}

/** The answer of acquire.lua. */
export type AcquireReply =
  | { readonly granted: true; readonly token: bigint; readonly serverMs: number | undefined }
  | {
      readonly granted: false;
      readonly holder: RawHolder;
      /** The ms left of the lock-delay an expired holder left; undefined for a live holder. */
      readonly lockDelayLeftMs?: number;
    };

/** An acquisition's lock-delay arguments: sent only when used, so the common call is unchanged. */
function lockDelayArgs(request: StoreAcquireRequest): ScriptArg[] {
  const delay = request.lockDelayMs ?? 0;
  if (delay === 0 && request.ignoreLockDelay !== true) return [];
  return [delay, request.ignoreLockDelay === true ? '1' : '0'];
}

/** Runs acquire.lua: grant, idempotent re-grant, or busy (which writes nothing). */
export function runAcquire(
  redis: RedisClient,
  keys: LeaseKeys,
  leaseId: string,
  ownerId: string,
  ttlMs: number,
  value: string | undefined,
  tokenBlock = 1,
  epochFloor = 0n,
  request?: StoreAcquireRequest,
): Promise<AcquireReply> {
  const args: ScriptArg[] = [
    leaseId,
    ownerId,
    ttlMs,
    value === undefined ? '' : `=${value}`,
    tokenBlock,
    keys.channel,
  ];
  const delay = request === undefined ? [] : lockDelayArgs(request);
  // Sent only once an epoch was raised: the common case keeps its arguments as they were.
  if (epochFloor > 0n || delay.length > 0) args.push(epochFloor.toString(), ...delay);
  return SCRIPTS.acquire.call(redis, [keys.record], args, readAcquire);
}

const readAcquire = (reply: unknown): AcquireReply => acquireReplyOf(asArray(reply), 0);

function acquireReplyOf(reply: unknown[], at: number): AcquireReply {
  if (reply[at] === 1) {
    const ms = reply[at + 2];
    return {
      granted: true,
      token: asToken(reply[at + 1]),
      serverMs: typeof ms === 'number' ? ms : undefined,
    };
  }
  const left = reply[at + 6];
  return typeof left === 'number'
    ? { granted: false, holder: holderOf(reply, at + 1), lockDelayLeftMs: left }
    : { granted: false, holder: holderOf(reply, at + 1) };
}

/** Runs handoff.lua: release `from`, then an acquire attempt for `leaseId`, in one step. */
export async function runHandOff(
  redis: RedisClient,
  keys: LeaseKeys,
  from: { readonly leaseId: string; readonly token: bigint },
  leaseId: string,
  ownerId: string,
  ttlMs: number,
  value: string | undefined,
  tokenBlock = 1,
  epochFloor = 0n,
  request?: StoreAcquireRequest,
): Promise<{ released: boolean; acquire: AcquireReply }> {
  const args: ScriptArg[] = [
    from.leaseId,
    from.token.toString(),
    keys.channel,
    leaseId,
    ownerId,
    ttlMs,
    value === undefined ? '' : `=${value}`,
  ];
  const delay = request === undefined ? [] : lockDelayArgs(request);
  if (tokenBlock > 1 || epochFloor > 0n || delay.length > 0) args.push(tokenBlock);
  if (epochFloor > 0n || delay.length > 0) args.push(epochFloor.toString(), ...delay);
  const reply = asArray(await SCRIPTS.handoff.run(redis, [keys.record], args));
  return { released: reply[0] === 1, acquire: acquireReplyOf(reply, 1) };
}

/** Runs renew.lua: the server's time in ms when renewed, undefined when lost. */
export async function runRenew(
  redis: RedisClient,
  keys: LeaseKeys,
  leaseId: string,
  token: bigint,
  ttlMs: number,
): Promise<number | undefined> {
  const reply = await SCRIPTS.renew.run(redis, [keys.record], [leaseId, token.toString(), ttlMs]);
  return typeof reply === 'string' ? Number(reply) : undefined;
}

/** The answer of one renew-many.lua call. */
export interface RenewManyReply {
  /** Redis TIME in ms when the call ran. */
  readonly serverMs: number;
  /** Whether the call's `k`-th lease was renewed (else it is lost). */
  readonly renewed: (k: number) => boolean;
}

/**
 * Runs renew-many.lua for `leases` (whose record names are `records`, by position), or for
 * those at the positions in `at` only (one Cluster slot's share), in that order.
 */
export async function runRenewMany(
  redis: RedisClient,
  leases: readonly StoreRenewRequest[],
  records: readonly string[],
  at: readonly number[] | undefined,
): Promise<RenewManyReply> {
  const n = at === undefined ? leases.length : at.length;
  const keys = new Array<string>(n);
  const args = new Array<ScriptArg>(3 * n);
  for (let k = 0; k < n; k++) {
    const i = at === undefined ? k : at[k]!;
    const lease = leases[i]!;
    keys[k] = records[i]!;
    args[3 * k] = lease.leaseId;
    args[3 * k + 1] = lease.token.toString();
    args[3 * k + 2] = lease.ttlMs;
  }
  const reply = asArray(await SCRIPTS.renewMany.run(redis, keys, args));
  if (reply.length !== n + 1 || typeof reply[0] !== 'string') {
    throw new TypeError(`unexpected renew-many reply of ${reply.length} items for ${n}`);
  }
  return { serverMs: Number(reply[0]), renewed: (k) => reply[k + 1] === 1 };
}

/** Runs release.lua: true when released (and waiters were told), false when not the owner. */
export function runRelease(
  redis: RedisClient,
  keys: LeaseKeys,
  leaseId: string,
  token: bigint,
): Promise<boolean> {
  return SCRIPTS.release.call(
    redis,
    [keys.record],
    [leaseId, token.toString(), keys.channel],
    isOne,
  );
}

const isOne = (reply: unknown): boolean => reply === 1;

/** Runs epoch-raise.lua: raises one record to `floor` and clears its holder. */
export async function runEpochRaise(
  redis: RedisClient,
  keys: LeaseKeys,
  floor: bigint,
): Promise<boolean> {
  return (
    (await SCRIPTS.epochRaise.run(redis, [keys.record], [floor.toString(), keys.channel])) === 1
  );
}

/** Runs inspect.lua: the last token and the live holder, if any. */
export async function runInspect(
  redis: RedisClient,
  keys: LeaseKeys,
): Promise<{ lastToken: bigint; holder: RawHolder | undefined }> {
  const reply = asArray(await SCRIPTS.inspect.run(redis, [keys.record], []));
  const last = reply[0];
  const lastToken = last === '0' ? 0n : asToken(last);
  return { lastToken, holder: reply.length > 1 ? holderOf(reply, 1) : undefined };
}

function holderOf(reply: unknown[], at: number): RawHolder {
  const [owner, token, remaining, prefix, value] = reply.slice(at);
  return {
    ownerId: typeof owner === 'string' ? owner : '',
    token: asToken(token),
    remainingMs: typeof remaining === 'number' && remaining > 0 ? remaining : 0,
    leaseIdPrefix: typeof prefix === 'string' ? prefix : '',
    // Stored as '=' + value so that an empty value and no value stay distinct.
    value: typeof value === 'string' && value.startsWith('=') ? value.slice(1) : undefined,
  };
}

function asArray(reply: unknown): unknown[] {
  if (!Array.isArray(reply)) throw new TypeError(`unexpected script reply ${String(reply)}`);
  return reply as unknown[];
}

const CANONICAL = /^[1-9][0-9]{0,18}$/;

function asToken(value: unknown): bigint {
  if (typeof value !== 'string' || !CANONICAL.test(value)) {
    throw new TypeError(`unexpected token in script reply: ${String(value)}`);
  }
  return BigInt(value);
}
