/**
 * How a conformance kit reaches a test runner. The kits (`storeContract`, `fenceContract`)
 * only describe cases; a {@link KitRunner} registers them with node:test
 * ({@link nodeTestRunner}, the default), with any `describe`/`it` runner such as vitest or
 * jest ({@link describeItRunner}), or runs them in-process and reports ({@link runKitCases}).
 */

/** What a case may ask of its test: mark itself skipped, with the reason, and then return. */
export interface KitCaseContext {
  /**
   * Marks the case skipped because the implementation lacks what it checks (a capability),
   * so the report shows a visible skip with the reason, never a silent pass.
   */
  skip(reason: string): void;
}

/** One behaviour of a kit: `run` rejects (an assertion error) when the subject breaks it. */
export interface KitCase<H> {
  readonly name: string;
  /** Longest time the case may take on a loaded machine. Defaults to 30 s. */
  readonly timeoutMs?: number;
  run(harness: H, t: KitCaseContext): Promise<void>;
}

/** Registers a kit's cases with a test runner. */
export interface KitRunner {
  describe(name: string, body: () => void): void;
  it(name: string, timeoutMs: number, body: (t: KitCaseContext) => Promise<void>): void;
  /** Runs once before the cases of the enclosing `describe`. */
  before(fn: () => Promise<void>): void;
  /** Runs once after them, whatever they did. */
  after(fn: () => Promise<void>): void;
}

/** The default case timeout. */
export const DEFAULT_CASE_TIMEOUT_MS = 30_000;

interface NodeTestModule {
  describe(name: string, fn: () => void): unknown;
  it(
    name: string,
    options: { timeout: number },
    fn: (t: { skip(message?: string): void }) => Promise<void>,
  ): unknown;
  before(fn: () => Promise<void>): unknown;
  after(fn: () => Promise<void>): unknown;
}

/**
 * Registers a kit's cases with Node's own test runner (`node --test`). Loaded on first use,
 * so importing `leasehold/testing` under another runner never loads node:test.
 *
 * @example
 * storeContract({ name: 'my-store', open: () => new MyStore() }, { runner: nodeTestRunner() });
 */
export function nodeTestRunner(): KitRunner {
  const t = process.getBuiltinModule('node:test') as unknown as NodeTestModule;
  return {
    describe: (name, body) => void t.describe(name, body),
    it: (name, timeoutMs, body) => void t.it(name, { timeout: timeoutMs }, (ctx) => body(ctx)),
    before: (fn) => void t.before(fn),
    after: (fn) => void t.after(fn),
  };
}

/** The part of a vitest- or jest-style API that {@link describeItRunner} uses. */
export interface DescribeItApi {
  describe(name: string, fn: () => void): unknown;
  it(name: string, fn: (...context: unknown[]) => Promise<void>, timeoutMs?: number): unknown;
  beforeAll(fn: () => Promise<void>, timeoutMs?: number): unknown;
  afterAll(fn: () => Promise<void>, timeoutMs?: number): unknown;
}

/**
 * Registers a kit's cases with a `describe`/`it`/`beforeAll`/`afterAll` runner (vitest, jest,
 * mocha with aliases). A case that does not apply calls the runner context's `skip(reason)`
 * when it has one (vitest); where it has none (jest), the case passes with a console warning
 * naming the reason.
 *
 * @example
 * import { describe, it, beforeAll, afterAll } from 'vitest';
 * storeContract(harness, { runner: describeItRunner({ describe, it, beforeAll, afterAll }) });
 */
export function describeItRunner(api: DescribeItApi): KitRunner {
  return {
    describe: (name, body) => void api.describe(name, body),
    // Rest parameters keep the function's length 0: jest reads a declared parameter as a
    // `done` callback and would wait for it.
    it: (name, timeoutMs, body) =>
      void api.it(
        name,
        (...context: unknown[]) => {
          const runnerSkip = (context[0] as { skip?: unknown } | undefined)?.skip;
          return body({
            skip: (reason) => {
              if (typeof runnerSkip === 'function')
                (runnerSkip as (note?: string) => void).call(context[0], reason);
              else console.warn(`[leasehold kit] skipped: ${name}: ${reason}`);
            },
          });
        },
        timeoutMs,
      ),
    before: (fn) => void api.beforeAll(fn, DEFAULT_CASE_TIMEOUT_MS),
    after: (fn) => void api.afterAll(fn, DEFAULT_CASE_TIMEOUT_MS),
  };
}

/** What became of one case in {@link runKitCases}. */
export type KitCaseOutcome =
  | { readonly name: string; readonly status: 'passed' }
  | { readonly name: string; readonly status: 'skipped'; readonly reason: string }
  | { readonly name: string; readonly status: 'failed'; readonly error: unknown };

/**
 * Runs `cases` one after another against `harness`, in this process, without a test runner,
 * and reports each: for a script that checks an implementation, or a test that asserts what
 * the kit finds (a deliberately broken implementation must fail it). A case that exceeds its
 * timeout fails.
 */
export async function runKitCases<H>(
  cases: readonly KitCase<H>[],
  harness: H,
): Promise<KitCaseOutcome[]> {
  const out: KitCaseOutcome[] = [];
  for (const c of cases) {
    let skipped: string | undefined;
    const timeoutMs = c.timeoutMs ?? DEFAULT_CASE_TIMEOUT_MS;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        c.run(harness, { skip: (reason) => (skipped = reason) }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`case timed out after ${timeoutMs} ms`)),
            timeoutMs,
          );
        }),
      ]);
      out.push(
        skipped === undefined
          ? { name: c.name, status: 'passed' }
          : { name: c.name, status: 'skipped', reason: skipped },
      );
    } catch (error) {
      out.push({ name: c.name, status: 'failed', error });
    } finally {
      clearTimeout(timer);
    }
  }
  return out;
}
