import { readFileSync } from 'node:fs';
import { ReplyError } from 'ioredis';
import type { RedisClient } from '../drivers/redis/client.js';
import { DECIMAL_LUA, type LuaScript, type ScriptArg } from '../drivers/redis/lua-script.js';

/**
 * The Redis fence as a Redis Functions library (Redis ≥ 7, decision 034): the same decision
 * as the fence script, callable with `FCALL` from any client in any language. The library is
 * built from the script's own files — decimal.lua, each write's `leasehold_write` and
 * fence.lua — so both paths run one implementation; function-args.lua adds the argument
 * checks a caller outside leasehold needs. Every function takes fence.lua's KEYS and ARGV.
 */

const lua = (file: string): string =>
  readFileSync(new URL(`./scripts/${file}`, import.meta.url), 'utf8');

/** The library's name in `FUNCTION LIST`; `FUNCTION LOAD REPLACE` swaps in a newer copy. */
export const FENCE_LIBRARY = 'leasehold_fence';

/** The library's functions by write kind: their `FCALL` names. */
export const FENCE_FUNCTIONS = Object.freeze({
  set: 'leasehold_fence_set',
  hset: 'leasehold_fence_hset',
  commands: 'leasehold_fence_commands',
  claim: 'leasehold_fence_claim',
});

/** A write kind of the library. */
export type FenceFunctionKind = keyof typeof FENCE_FUNCTIONS;

function register(kind: FenceFunctionKind, write: string, fence: string): string {
  // Each write defines its own local `leasehold_write`: one `do` block per function keeps
  // them apart, and fence.lua's body becomes the function's body unchanged.
  return `do
${write}
redis.register_function('${FENCE_FUNCTIONS[kind]}', function(KEYS, ARGV)
  local bad = leasehold_bad_call(KEYS, ARGV, ${kind === 'claim' ? 'true' : 'false'})
  if bad then return bad end
${fence}
end)
end`;
}

/** The library's source, as `FUNCTION LOAD` takes it. */
export function fenceLibrarySource(): string {
  const fence = lua('fence.lua');
  return [
    `#!lua name=${FENCE_LIBRARY}`,
    readFileSync(DECIMAL_LUA, 'utf8'),
    lua('function-args.lua'),
    register('set', lua('write-set.lua'), fence),
    register('hset', lua('write-hset.lua'), fence),
    register('commands', lua('write-commands.lua'), fence),
    register('claim', 'local function leasehold_write() return nil end', fence),
  ].join('\n');
}

const LIBRARY = fenceLibrarySource();

/** ioredis' generic command call, which the structural client type does not name. */
type CommandCall = (command: string, ...args: ScriptArg[]) => Promise<unknown>;

/**
 * Runs the fence's decisions for one `RedisFence`: `FCALL` of the library's function when the
 * server has it, else the script (EVALSHA). The first call loads the library with `FUNCTION
 * LOAD REPLACE` (so the server runs this version's code), which tells which; a server that
 * refuses it (Redis < 7, no permission) gets the script from then on, and one that lost it
 * (a flush, a failover to a node without it) gets it loaded again once.
 */
export class FenceRunner {
  /** How writes run: decided by the first one, undefined until then. */
  via: 'function' | 'script' | undefined;
  private readonly command: CommandCall | undefined;
  private loading: Promise<void> | undefined;

  constructor(
    private readonly redis: RedisClient,
    functions: boolean,
  ) {
    const call = (redis as unknown as { call?: unknown }).call;
    // A Cluster client would load the library on one node only: Clusters keep the script.
    const cluster = typeof (redis as { nodes?: unknown }).nodes === 'function';
    this.command =
      functions && !cluster && typeof call === 'function'
        ? (call as CommandCall).bind(redis)
        : undefined;
    if (this.command === undefined) this.via = 'script';
  }

  /** Runs one decision; `kind` undefined (a user's own Lua body) always runs the script. */
  run(
    script: LuaScript,
    kind: FenceFunctionKind | undefined,
    keys: readonly string[],
    args: readonly ScriptArg[],
  ): Promise<unknown> {
    if (kind === undefined || this.via === 'script') return script.run(this.redis, keys, args);
    if (this.via === undefined) return this.load().then(() => this.run(script, kind, keys, args));
    return this.fcall(kind, keys, args).catch(async (err: unknown) => {
      if (
        !(err instanceof ReplyError) ||
        !/^ERR Function not found/i.test(String((err as Error).message))
      )
        throw err;
      this.via = undefined;
      await this.load();
      return this.via === 'function'
        ? this.fcall(kind, keys, args)
        : script.run(this.redis, keys, args);
    });
  }

  private fcall(
    kind: FenceFunctionKind,
    keys: readonly string[],
    args: readonly ScriptArg[],
  ): Promise<unknown> {
    return this.command!('FCALL', FENCE_FUNCTIONS[kind], keys.length, ...keys, ...args);
  }

  private load(): Promise<void> {
    this.loading ??= this.command!('FUNCTION', 'LOAD', 'REPLACE', LIBRARY)
      .then(
        () => {
          this.via = 'function';
        },
        (err: unknown) => {
          if (!(err instanceof ReplyError)) throw err;
          this.via = 'script';
        },
      )
      .finally(() => {
        this.loading = undefined;
      });
    return this.loading;
  }
}
