import { invalidArgument } from '../core/errors.js';
import type { FenceResult } from '../core/results.js';

/** The fenced write a wrapper is told about before it runs. */
export interface FencedWriteStart {
  /** The fence method called (`apply`, `write`, `set` …). */
  readonly method: string;
  /** The fencing scope the write is for, as given. */
  readonly scope: string;
  /** The writer's token as given (a bigint or a decimal string). */
  readonly token: bigint | string;
}

/** How one fenced write ended: the fence's answer, or what it threw. */
export type FencedWriteEnd =
  | {
      readonly ok: true;
      readonly status: FenceResult['status'];
      /** With `stale_fence`: the high-water mark that refused the token. */
      readonly highWaterMark?: bigint;
    }
  | { readonly ok: false; readonly error: unknown };

/**
 * Watches fenced writes: `start` is called before the write runs and returns the function
 * to call with its end, and `run` runs the write (e.g. inside a tracing context).
 */
export interface FenceWatcher {
  start(write: FencedWriteStart): {
    readonly run: <T>(write: () => T) => T;
    readonly end: (outcome: FencedWriteEnd) => void;
  };
}

/**
 * The fenced-write methods of leasehold's fences and where their scope and token are:
 * `SqliteFence.apply(scope, token, …)` (synchronous), `PostgresFence.write({ scope, token }, …)`,
 * `RedisFence.set | hset | commands | script(scope, token, …)`. Known by name rather than by
 * class, so that wrapping a fence never loads a database driver.
 */
const FENCED_WRITES: Readonly<Record<string, (args: readonly unknown[]) => [unknown, unknown]>> =
  Object.freeze({
    apply: positional,
    set: positional,
    hset: positional,
    commands: positional,
    script: positional,
    write: (args) => {
      const request = args[0] as { scope?: unknown; token?: unknown } | null | undefined;
      return [request?.scope, request?.token];
    },
  });

function positional(args: readonly unknown[]): [unknown, unknown] {
  return [args[0], args[1]];
}

const FENCE_STATUSES: ReadonlySet<unknown> = new Set(['applied', 'duplicate', 'stale_fence']);

/**
 * Wraps `fence` so that `watcher` sees every fenced write: a proxy with the fence's own type,
 * whose fenced-write methods report their outcome and whose other members (`highWaterMark`,
 * `close` …) are the fence's. The fence itself is unchanged.
 */
export function wrapFence<F extends object>(fence: F, watcher: FenceWatcher): F {
  if (typeof fence !== 'object' || fence === null)
    throw invalidArgument('fence', 'must be a fence object', fence);
  const target = fence as Record<string, unknown>;
  if (!Object.keys(FENCED_WRITES).some((name) => typeof target[name] === 'function')) {
    throw invalidArgument(
      'fence',
      `must have a fenced-write method (${Object.keys(FENCED_WRITES).join(', ')})`,
      fence,
    );
  }
  const wrapped = new Map<string, (...args: unknown[]) => unknown>();
  return new Proxy(fence, {
    get(obj, prop, receiver) {
      const value: unknown = Reflect.get(obj, prop, receiver);
      if (typeof prop !== 'string' || typeof value !== 'function' || prop === 'constructor')
        return value;
      let fn = wrapped.get(prop);
      if (fn !== undefined) return fn;
      const method = value as (...args: unknown[]) => unknown;
      const locate = FENCED_WRITES[prop];
      if (locate === undefined) {
        // Other methods run on the fence itself too (`this` the target, never the proxy), so
        // that private state of any kind keeps working.
        fn = (...args: unknown[]): unknown => method.apply(obj, args);
        wrapped.set(prop, fn);
        return fn;
      }
      fn = (...args: unknown[]): unknown => {
        // The fence's own `this`: its private state lives on the target, not the proxy.
        const call = (): unknown => method.apply(obj, args);
        const [scope, token] = locate(args);
        let watch: ReturnType<FenceWatcher['start']>;
        try {
          watch = watcher.start({
            method: prop,
            scope: String(scope),
            token: typeof token === 'bigint' ? token : String(token),
          });
        } catch {
          // A failing monitor never changes a fence outcome.
          return call();
        }
        const end = (outcome: FencedWriteEnd): void => {
          try {
            watch.end(outcome);
          } catch {
            // As above: the write's outcome stands.
          }
        };
        let result: unknown;
        try {
          result = watch.run(call);
        } catch (error) {
          end({ ok: false, error });
          throw error;
        }
        if (isThenable(result)) {
          return result.then(
            (settled) => {
              end(outcomeOf(settled));
              return settled;
            },
            (error: unknown) => {
              end({ ok: false, error });
              throw error;
            },
          );
        }
        end(outcomeOf(result));
        return result;
      };
      wrapped.set(prop, fn);
      return fn;
    },
  });
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

function outcomeOf(result: unknown): FencedWriteEnd {
  const r = result as { status?: unknown; highWaterMark?: unknown } | null | undefined;
  const status = r?.status;
  if (FENCE_STATUSES.has(status)) {
    const mark = r?.highWaterMark;
    return typeof mark === 'bigint'
      ? { ok: true, status: status as FenceResult['status'], highWaterMark: mark }
      : { ok: true, status: status as FenceResult['status'] };
  }
  return { ok: false, error: new TypeError(`a fenced write answered ${String(status)}`) };
}
