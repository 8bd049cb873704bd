import { readFileSync } from 'node:fs';
import { ReplyError } from 'ioredis';
import { invalidArgument, LeaseholdError } from '../core/errors.js';
import type { ClaimResult, FenceResult } from '../core/results.js';
import { parseToken, validateKey } from '../core/validate.js';
import type { RedisClient } from '../drivers/redis/client.js';
import { DECIMAL_LUA, LuaScript, type ScriptArg } from '../drivers/redis/lua-script.js';
import type { FenceDecisionHook } from '../core/fence-decision.js';
import { checkDecisionHook, claimDecision, tellDecision } from './decision.js';
import { FenceRunner, type FenceFunctionKind } from './redis-functions.js';

export type { FenceDecision, FenceDecisionHook } from '../core/fence-decision.js';
export { FENCE_FUNCTIONS, FENCE_LIBRARY, fenceLibrarySource } from './redis-functions.js';

/**
 * Which tokens pass the high-water mark: `>=` lets one lease make several writes (the same
 * token again), `>` allows one write per grant.
 */
export type FencePolicy = '>=' | '>';

/** Options for {@link RedisFence}. */
export interface RedisFenceOptions {
  /** The ioredis client of the Redis that holds the protected data. Never closed by the fence. */
  readonly redis: RedisClient;
  /** Prefix of the fence's own keys (`<prefix>{<scope>}:hwm` …). No `{`/`}`. Defaults to `leasehold:fence:`. */
  readonly prefix?: string;
  /** Defaults to `>=`. */
  readonly policy?: FencePolicy;
  /** How long an idempotency record is kept (ms). Defaults to 86 400 000 (24 h). */
  readonly idempotencyTtlMs?: number;
  /**
   * Told every decision once Redis has answered it, e.g. to report stale rejections to the
   * lease server (`createFenceReporter` in `leasehold/http`). Defaults to none.
   */
  readonly onDecision?: FenceDecisionHook;
  /**
   * Run the fence as the `leasehold_fence` Redis Functions library (loaded with `FUNCTION LOAD
   * REPLACE` on first use, the same decision any client can `FCALL`) when the server has
   * Redis Functions (Redis ≥ 7, a single node or Sentinel); `false` always runs the script.
   * A server without functions, or one that refuses `FUNCTION LOAD`, gets the script either
   * way. Writes with your own Lua body (`script`) always run as a script. Defaults to `true`.
   */
  readonly functions?: boolean;
}

/** Options for one fenced write. */
export interface FenceWriteOptions {
  /**
   * Identifies the operation across retries: a retry with the same token and key answers
   * `duplicate` and writes nothing again. Defaults to none (no duplicate detection).
   */
  readonly idempotencyKey?: string;
}

/** One command of {@link RedisFence.commands}: called as `command keys… args…`. */
export interface FenceCommand {
  readonly command: string;
  /** The keys the command touches, declared so Redis (and Cluster) can check them. */
  readonly keys?: readonly string[];
  readonly args?: readonly ScriptArg[];
}

/** A user-supplied Lua body for {@link RedisFence.script}. */
export interface FenceScript {
  /**
   * The body of a Lua function of `(KEYS, ARGV)`: your keys and arguments only, starting at
   * index 1. Its return value is `applied.value`. Avoid raising errors after writing: Redis
   * does not roll back, and the fence's mark is only advanced when the body returns.
   */
  readonly body: string;
  readonly keys?: readonly string[];
  readonly args?: readonly ScriptArg[];
}

/** The defaults of {@link RedisFenceOptions}. */
export const REDIS_FENCE_DEFAULTS = Object.freeze({
  prefix: 'leasehold:fence:',
  policy: '>=',
  idempotencyTtlMs: 86_400_000,
});

const lua = (file: string): URL => new URL(`./scripts/${file}`, import.meta.url);
const FENCE_LUA = readFileSync(lua('fence.lua'), 'utf8');
const DECIMAL = readFileSync(DECIMAL_LUA, 'utf8');
const fenceWith = (name: string, write: string): LuaScript =>
  new LuaScript(name, `${DECIMAL}\n${write}\n${FENCE_LUA}`);
const WRITES: Record<FenceFunctionKind, LuaScript> = {
  set: fenceWith('fence-set', readFileSync(lua('write-set.lua'), 'utf8')),
  hset: fenceWith('fence-hset', readFileSync(lua('write-hset.lua'), 'utf8')),
  commands: fenceWith('fence-commands', readFileSync(lua('write-commands.lua'), 'utf8')),
  // A claim runs fence.lua's decision and never calls the write.
  claim: fenceWith('fence-claim', 'local function leasehold_write() return nil end'),
};
const MAX_CACHED_BODIES = 256;

/**
 * The resource-side fence for data in Redis: one Lua script compares the token with the
 * scope's high-water mark, applies the write, and advances the mark — atomically, so no
 * write with a lower token is ever accepted after a higher one (invariant I1).
 *
 * - Results: `applied` (with the write's reply), `duplicate` (the same idempotency key was
 *   applied under this token before: nothing done again), `stale_fence` (a newer token has
 *   reached the scope: definitive, never retry under this lease). Anything else (Redis
 *   unreachable, a script error) throws a `LeaseholdError`.
 * - Tokens go to Lua as decimal strings and are compared as decimal strings, so tokens past
 *   2^53 (Lua numbers are doubles) compare exactly.
 * - The mark lives at `<prefix>{<scope>}:hwm` and never expires (a claim's marker next to it
 *   at `…:claimed`). In a Redis Cluster every key a write touches must share the scope's hash
 *   tag — name them `…{<scope>}…`.
 * - {@link RedisFence.claim} installs a generation with no write (claim before start).
 * - The mark is only as durable as this Redis (persistence, replication): use AOF with
 *   `appendfsync always` on the resource Redis if a restart must not forget it.
 *
 * @example
 * const fence = new RedisFence({ redis });
 * const r = await fence.set('report/july', lease.token, 'report:{report/july}', body);
 * if (r.status === 'stale_fence') throw new Error(`superseded by ${r.highWaterMark}`);
 */
export class RedisFence {
  readonly prefix: string;
  readonly policy: FencePolicy;
  private readonly redis: RedisClient;
  private readonly idempotencyTtlMs: number;
  private readonly bodies = new Map<string, LuaScript>();
  private readonly onDecision: FenceDecisionHook | undefined;
  private readonly runner: FenceRunner;

  constructor(options: RedisFenceOptions) {
    if (typeof options !== 'object' || options === null)
      throw invalidArgument('options', 'must be an object', options);
    if (typeof options.redis?.evalsha !== 'function')
      throw invalidArgument('redis', 'must be an ioredis client', options.redis);
    this.redis = options.redis;
    const prefix = options.prefix ?? REDIS_FENCE_DEFAULTS.prefix;
    if (typeof prefix !== 'string' || /[{}]/.test(prefix))
      throw invalidArgument('prefix', 'must be a string without { or }', prefix);
    this.prefix = prefix;
    const policy = options.policy ?? REDIS_FENCE_DEFAULTS.policy;
    if (policy !== '>=' && policy !== '>')
      throw invalidArgument('policy', "must be '>=' or '>'", policy);
    this.policy = policy;
    const ttl = options.idempotencyTtlMs ?? REDIS_FENCE_DEFAULTS.idempotencyTtlMs;
    if (!Number.isInteger(ttl) || ttl < 1000 || ttl > 30 * 86_400_000)
      throw invalidArgument('idempotencyTtlMs', 'must be an integer from 1000 to 30 days', ttl);
    this.idempotencyTtlMs = ttl;
    this.onDecision = checkDecisionHook(options.onDecision);
    const functions = options.functions ?? true;
    if (typeof functions !== 'boolean')
      throw invalidArgument('functions', 'must be a boolean', functions);
    this.runner = new FenceRunner(options.redis, functions);
  }

  /** Whether writes run as the Redis Functions library (`'function'`) or the script, once known. */
  get runsAs(): 'function' | 'script' | undefined {
    return this.runner.via;
  }

  /** Fenced `SET key value`. */
  set(
    scope: string,
    token: bigint | string,
    key: string,
    value: string,
    options?: FenceWriteOptions,
  ): Promise<FenceResult<string>> {
    return this.apply<string>(WRITES.set, 'set', scope, token, [key], [value], options);
  }

  /** Fenced `HSET key field value …`. Resolves `applied` with the number of new fields. */
  hset(
    scope: string,
    token: bigint | string,
    key: string,
    fields: Readonly<Record<string, string>>,
    options?: FenceWriteOptions,
  ): Promise<FenceResult<number>> {
    const args = Object.entries(fields).flat();
    if (args.length === 0) throw invalidArgument('fields', 'must not be empty', fields);
    return this.apply<number>(WRITES.hset, 'hset', scope, token, [key], args, options);
  }

  /** Fenced list of commands, run in order in the same atomic step. Resolves with their replies. */
  commands(
    scope: string,
    token: bigint | string,
    commands: readonly FenceCommand[],
    options?: FenceWriteOptions,
  ): Promise<FenceResult<unknown[]>> {
    if (!Array.isArray(commands) || commands.length === 0)
      throw invalidArgument('commands', 'must be a non-empty array', commands);
    const keys: string[] = [];
    const args: ScriptArg[] = [];
    const list: readonly FenceCommand[] = commands;
    for (const c of list) {
      const name = (c as Partial<FenceCommand> | undefined)?.command as unknown;
      if (typeof name !== 'string' || !/^[A-Za-z][A-Za-z0-9_.|-]*$/.test(name))
        throw invalidArgument('commands[].command', 'must be a Redis command name', name);
      const ck = c.keys ?? [];
      const ca = c.args ?? [];
      keys.push(...ck);
      args.push(c.command, ck.length, ca.length, ...ca);
    }
    return this.apply<unknown[]>(WRITES.commands, 'commands', scope, token, keys, args, options);
  }

  /** Fenced user script: `body` runs only when the token passes, before the mark advances. */
  script<T = unknown>(
    scope: string,
    token: bigint | string,
    script: FenceScript,
    options?: FenceWriteOptions,
  ): Promise<FenceResult<T>> {
    if (typeof script?.body !== 'string' || script.body.trim() === '')
      throw invalidArgument('script.body', 'must be a non-empty Lua body', script?.body);
    let compiled = this.bodies.get(script.body);
    if (compiled === undefined) {
      if (this.bodies.size >= MAX_CACHED_BODIES) this.bodies.clear();
      compiled = fenceWith(
        'fence-script',
        `local function leasehold_write(KEYS, ARGV)\n${script.body}\nend`,
      );
      this.bodies.set(script.body, compiled);
    }
    return this.apply<T>(
      compiled,
      undefined,
      scope,
      token,
      script.keys ?? [],
      script.args ?? [],
      options,
    );
  }

  /**
   * Claim before start (DESIGN §4): installs `token`'s generation on `scope` with no domain
   * write, in the same script and atomic step as a write's check (as durable as this Redis,
   * like every mark), so that no write with a lower token is accepted here from now on —
   * even before this token's first write.
   *
   * The rule, the same in every fence: a claim at T answers `applied` exactly when a write at
   * T would pass now, and then leaves the mark at T (moved, or already there) without using
   * T's write:
   * - `>=`: applied when T ≥ mark. Tokens below T are refused; T writes as often as before.
   * - `>` (one write per grant): applied when T > mark, or T = mark installed by a claim not
   *   yet used by a write (so a repeated claim is idempotent). The mark then refuses every
   *   token below T, and T's one write still passes: the first write at T clears the claim,
   *   and the next write at T is refused as before. A claim at T after T has written answers
   *   `stale_fence` (T's write is spent).
   * - Otherwise `stale_fence` with the mark: a newer owner claimed or wrote; nothing changed.
   *
   * Throws `ERR_INVALID_ARGUMENT` for a malformed scope or token, `ERR_UNAVAILABLE` when
   * Redis cannot answer (the claim may or may not have landed: claim again). Told to
   * `onDecision` with `op: 'claim'`.
   *
   * @example
   * const r = await fence.claim('report/july', lease.token);
   * if (r.status === 'stale_fence') await lease.release(); // superseded before starting
   */
  async claim(scope: string, token: bigint | string): Promise<ClaimResult> {
    const s = validateKey(scope, 'scope');
    const t = parseToken(token);
    const reply = await this.call(() =>
      this.runner.run(
        WRITES.claim,
        'claim',
        [this.hwmKey(s), this.hwmKey(s), this.claimKey(s)],
        [t.toString(), this.policy, 'claim', this.idempotencyTtlMs],
      ),
    );
    const r = fenceResultOf<unknown>(reply);
    if (r.status === 'duplicate')
      throw new LeaseholdError('ERR_PROTOCOL', 'unexpected fence reply duplicate to a claim');
    tellDecision(this.onDecision, claimDecision(s, t, r));
    return r.status === 'applied' ? CLAIM_APPLIED : r;
  }

  /** The scope's high-water mark: the highest token accepted so far (0n when none). */
  async highWaterMark(scope: string): Promise<bigint> {
    const v = await this.call(() => this.redis.get(this.hwmKey(validateKey(scope, 'scope'))));
    return typeof v === 'string' ? BigInt(v) : 0n;
  }

  /** The Redis key of a scope's high-water mark. */
  hwmKey(scope: string): string {
    return `${this.prefix}{${scope}}:hwm`;
  }

  /** The Redis key of a scope's claim marker (see fence.lua). */
  private claimKey(scope: string): string {
    return `${this.prefix}{${scope}}:claimed`;
  }

  private async apply<T>(
    script: LuaScript,
    kind: FenceFunctionKind | undefined,
    scopeIn: string,
    tokenIn: bigint | string,
    keys: readonly string[],
    args: readonly ScriptArg[],
    options: FenceWriteOptions | undefined,
  ): Promise<FenceResult<T>> {
    const scope = validateKey(scopeIn, 'scope');
    const token = parseToken(tokenIn);
    const idem = options?.idempotencyKey;
    if (idem !== undefined) validateKey(idem, 'idempotencyKey');
    const hwm = this.hwmKey(scope);
    const idemKey = idem === undefined ? hwm : `${this.prefix}{${scope}}:op:${idem}`;
    const reply = await this.call(() =>
      this.runner.run(
        script,
        kind,
        [hwm, idemKey, this.claimKey(scope), ...keys],
        [
          token.toString(),
          this.policy,
          idem === undefined ? '0' : '1',
          this.idempotencyTtlMs,
          ...args,
        ],
      ),
    );
    const result = fenceResultOf<T>(reply);
    tellDecision(this.onDecision, {
      scope,
      token,
      status: result.status,
      ...(result.status === 'stale_fence' ? { highWaterMark: result.highWaterMark } : {}),
    });
    return result;
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof ReplyError) {
        throw new LeaseholdError(
          'ERR_PROTOCOL',
          `Redis rejected the fenced write: ${String(err)}`,
          {
            cause: err,
          },
        );
      }
      throw new LeaseholdError('ERR_UNAVAILABLE', `Redis fence unavailable: ${String(err)}`, {
        cause: err,
      });
    }
  }
}

const CLAIM_APPLIED: ClaimResult = Object.freeze({ status: 'applied' });

function fenceResultOf<T>(reply: unknown): FenceResult<T> {
  if (!Array.isArray(reply))
    throw new LeaseholdError('ERR_PROTOCOL', `unexpected fence reply ${String(reply)}`);
  switch (reply[0]) {
    case 'applied':
      return { status: 'applied', value: reply[1] as T };
    case 'duplicate':
      return { status: 'duplicate' };
    case 'stale_fence':
      return { status: 'stale_fence', highWaterMark: BigInt(String(reply[1])) };
    default:
      throw new LeaseholdError('ERR_PROTOCOL', `unexpected fence reply ${String(reply[0])}`);
  }
}
