import type { ClaimResult } from '../../core/results.js';
import type { KitCase } from '../kit/runner.js';

/** How a fence compares a token with its mark: `>=` several writes per grant, `>` one. */
export type FencePolicy = '>=' | '>';

/** What a fenced write came to, as the fence answered it. */
export type FenceWriteOutcome =
  | { readonly status: 'applied' }
  /** The same (token, idempotency key) was applied before; nothing was written again. */
  | { readonly status: 'duplicate' }
  /** A newer token reached the scope; nothing was written. `highWaterMark` is the scope's mark. */
  | { readonly status: 'stale_fence'; readonly highWaterMark: bigint };

/**
 * One open instance of the fence under test (one connection, one client of a service), as
 * the fence contract drives it. Many instances may be open at once over the same resource,
 * as several writers are.
 */
export interface FenceUnderTest {
  /**
   * One fenced write: append `value` to the scope's data at the resource, atomically with the
   * token check, and answer what the fence decided. With `idempotencyKey`, a retry of the same
   * (scope, token, key) must answer `duplicate` and write nothing. Rejects with a
   * `LeaseholdError` `ERR_INVALID_ARGUMENT` for a malformed token (a fence over HTTP turns its
   * 400 `invalid_argument` answer into that), and with any other error when the fence cannot
   * decide.
   */
  write(
    scope: string,
    token: bigint | string,
    value: string,
    options?: { readonly idempotencyKey?: string },
  ): Promise<FenceWriteOutcome>;
  /**
   * Claim before start: installs the token's generation on the scope with no data write (see
   * `ClaimResult`). Same errors as {@link write}.
   */
  claim(scope: string, token: bigint | string): Promise<ClaimResult> | ClaimResult;
  /**
   * The values the resource holds for the scope, in the order it accepted them: read from the
   * resource's own data (the table, the key, the upstream's log), never from the fence's answers.
   */
  accepted(scope: string): Promise<readonly string[]>;
  /** Frees this instance (its connection); the resource and its marks stay. */
  close(): Promise<void> | void;
}

/** What a fence may lack; a case that needs it then shows as skipped with the given reason. */
export type FenceFeature =
  | 'idempotency'
  | 'policy >'
  | 'policy >='
  | 'claim'
  /** A claim decided by the fence's own policy (a `>` claim after its token wrote is stale). */
  | 'claim by policy'
  /** Tokens with spaces around them reach the fence as sent (HTTP trims header values). */
  | 'untrimmed tokens'
  /**
   * A retried (token, idempotency key) below the scope's mark answers `stale_fence`, not
   * `duplicate`: the mark is compared before the key is looked up.
   */
  | 'stale before duplicate'
  /**
   * Under `>`, a refusal after a claim names the claimed token as the scope's mark. Without
   * it the refusal is still checked, but not the mark it names.
   */
  | 'claimed mark under >';

/**
 * How the fence contract reaches one fence. `open(policy)` gives a new instance over the
 * same durable resource and marks, so cases can model several writers and a re-open.
 *
 * @example
 * const harness: FenceHarness = {
 *   name: 'json-file',
 *   open: (policy) => new JsonFileFence(path, { policy }),
 * };
 */
export interface FenceHarness {
  readonly name: string;
  /** Throws (and so fails the run) when the fence's resource is unreachable. */
  open(policy: FencePolicy): Promise<FenceUnderTest> | FenceUnderTest;
  /**
   * Stops and starts the fence's own process or service, keeping what it stored durably (a
   * gateway or middleware restart). Defaults to nothing: closing every instance and opening a
   * new one is the re-open.
   */
  restart?(): Promise<void>;
  /** Features this fence does not have, each with why; the cases that need one are skipped. */
  readonly lacks?: Readonly<Partial<Record<FenceFeature, string>>>;
  /** Frees what the harness itself holds (temporary files, servers). Defaults to nothing. */
  teardown?(): Promise<void> | void;
}

/** One behaviour every fence must show. `run` rejects when the fence breaks the contract. */
export type FenceContractCase = KitCase<FenceHarness>;
