import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { RedisClient } from './client.js';

/** An argument to a script: strings and numbers go to Redis as bulk strings. */
export type ScriptArg = string | number;

/**
 * One Lua script, run with EVALSHA and, when the server answers NOSCRIPT (a restart, a
 * failover, `SCRIPT FLUSH`), once more with EVAL, which also caches it again. Does not touch
 * the caller's client (no `defineCommand`), so a user's ioredis instance stays as it was.
 */
export class LuaScript {
  readonly sha: string;

  constructor(
    readonly name: string,
    readonly source: string,
  ) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  /** Concatenates `.lua` files (copied to the build by scripts/copy-assets.mjs) into one script. */
  static fromFiles(name: string, ...files: URL[]): LuaScript {
    return new LuaScript(name, files.map((f) => readFileSync(f, 'utf8')).join('\n'));
  }

  /** Runs the script. Rejects with the driver's error (a ReplyError for script errors). */
  run(redis: RedisClient, keys: readonly string[], args: readonly ScriptArg[]): Promise<unknown> {
    return redis.evalsha(this.sha, keys.length, ...keys, ...args).catch((err: unknown) => {
      if (isNoScript(err)) return redis.eval(this.source, keys.length, ...keys, ...args);
      throw err;
    });
  }

  /**
   * Runs the script and reads its reply with `read`, in one promise step after the reply:
   * the lease operations' path, where each further step is a microtask and a promise per
   * call (at one worker every step is paid in full; see decision 023). A NOSCRIPT
   * answer runs it once more with EVAL. Rejects with the driver's error or `read`'s.
   */
  call<T>(
    redis: RedisClient,
    keys: readonly string[],
    args: readonly ScriptArg[],
    read: (reply: unknown) => T,
  ): Promise<T> {
    return redis.evalsha(this.sha, keys.length, ...keys, ...args).then(read, (err: unknown) => {
      if (isNoScript(err)) return redis.eval(this.source, keys.length, ...keys, ...args).then(read);
      throw err;
    });
  }
}

function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}

/** The prelude of decimal-string token helpers shared by lease and fence scripts. */
export const DECIMAL_LUA = new URL('./decimal.lua', import.meta.url);
