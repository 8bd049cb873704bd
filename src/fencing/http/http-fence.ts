import { invalidArgument, isLeaseholdError, LeaseholdError } from '../../core/errors.js';
import type { ClaimResult } from '../../core/results.js';
import { parseToken, validateKey } from '../../core/validate.js';
import {
  checkDecisionHook,
  claimDecision,
  tellDecision,
  type FenceDecisionHook,
} from '../decision.js';
import {
  checkPolicy,
  type AnswerRecord,
  type MarkPolicy,
  type MarkStore,
} from '../marks/mark-store.js';
import { ScopeQueue } from '../scope-queue.js';
import { replayOf } from './answer-replay.js';
import { checkRequestTarget } from './request-target.js';
import { fenceErrorBody, FENCE_ERROR_STATUS, type FenceErrorCode } from './fence-error.js';
import {
  MARK_HEADER,
  VERSION_HEADER,
  parseFenceHeaders,
  resolveHeaderNames,
  type FenceHeaderNames,
  type FenceHeaderOptions,
} from './fence-headers.js';

/** Options shared by the Fastify plugin and the connect-style middleware. */
export interface HttpFenceOptions {
  /** Where the marks live (see `openMarkStore`); never closed by the fence. */
  readonly marks: MarkStore;
  /** `>=` several writes per grant, `>` one per grant. Defaults to `>=`. */
  readonly policy?: MarkPolicy;
  /** Header names. Defaults: `Fencing-Token`, `Idempotency-Key`, `Fencing-Expected-Version`. */
  readonly headers?: FenceHeaderOptions;
  /** Requests of one scope waiting behind the one in progress; more get 429. Defaults to 64. */
  readonly maxQueuePerScope?: number;
  /** Told every final decision (e.g. `createFenceReporter(…).onDecision`). Defaults to none. */
  readonly onDecision?: FenceDecisionHook;
}

/** The outcome of {@link HttpFence.enter}. */
export type HttpFenceEntry =
  /**
   * The token passed and the mark is committed: run the handler, then call `done(answer)`
   * when the response finished (that frees the scope for the next request). With `capture`
   * (the request has an idempotency key) pass what the handler answered — `captureAnswer(res)`
   * gives it — so that a retry of the key gets it replayed; a bare HTTP status (or nothing)
   * records that the request ran but keeps no answer to replay.
   */
  | {
      readonly status: 'pass';
      readonly version: bigint | undefined;
      readonly capture: boolean;
      done(answer?: AnswerRecord | number): void;
    }
  /**
   * A retry of an idempotency key whose first answer was kept: send this answer again (with
   * `Idempotent-Replayed: true`); the handler does not run.
   */
  | {
      readonly status: 'replay';
      readonly httpStatus: number;
      readonly headers: Readonly<Record<string, string>>;
      readonly body: Buffer;
    }
  /** Refused: answer with this status, these headers and this JSON body; nothing ran. */
  | {
      readonly status: 'refused';
      readonly code: FenceErrorCode;
      readonly httpStatus: number;
      readonly headers: Readonly<Record<string, string>>;
      readonly body: string;
    };

const refused = (
  code: FenceErrorCode,
  message: string,
  headers: Record<string, string> = {},
): HttpFenceEntry => ({
  status: 'refused',
  code,
  httpStatus: FENCE_ERROR_STATUS[code],
  headers,
  body: fenceErrorBody(code, message),
});

/**
 * The token check of `leasehold/fencing/http`, independent of the framework: parses the
 * fencing headers, waits its turn in the scope (one request per scope at a time in this
 * process), checks and advances the durable mark, and keeps the scope until the handler's
 * response finished.
 */
export class HttpFence {
  private readonly marks: MarkStore;
  private readonly policy: MarkPolicy;
  private readonly names: FenceHeaderNames;
  private readonly queue: ScopeQueue;
  private readonly onDecision: FenceDecisionHook | undefined;

  constructor(options: HttpFenceOptions) {
    if (typeof options?.marks?.check !== 'function')
      throw invalidArgument('marks', 'must be a mark store (openMarkStore)', options?.marks);
    this.marks = options.marks;
    this.policy = checkPolicy(options.policy ?? '>=');
    this.names = resolveHeaderNames(options.headers);
    const max = options.maxQueuePerScope ?? 64;
    if (!Number.isInteger(max) || max < 0 || max > 100_000)
      throw invalidArgument('maxQueuePerScope', 'must be an integer from 0 to 100000', max);
    this.queue = new ScopeQueue(max);
    this.onDecision = checkDecisionHook(options.onDecision);
  }

  /**
   * Refuses a request target that HTTP stacks could read as different paths (see
   * `checkRequestTarget`): the scope must come from the path the handler acts on. Undefined
   * when the target is canonical.
   */
  refuseTarget(
    target: string | undefined,
  ): Extract<HttpFenceEntry, { status: 'refused' }> | undefined {
    const t = checkRequestTarget(target ?? '');
    if (t.status === 'canonical') return undefined;
    return refused('invalid_argument', t.message) as Extract<HttpFenceEntry, { status: 'refused' }>;
  }

  /** The answer to a retried idempotency key: the kept answer, or `duplicate`. */
  private async replay(
    scope: string,
    token: bigint,
    key: string | undefined,
  ): Promise<HttpFenceEntry> {
    let record: AnswerRecord | undefined;
    try {
      record = key === undefined ? undefined : await this.marks.answer(scope, token, key);
    } catch {
      // The key's record cannot be read: not run again, and nothing to replay.
      record = undefined;
    }
    const r = replayOf(record);
    return r.status === 'replay'
      ? { status: 'replay', httpStatus: r.httpStatus, headers: r.headers, body: r.body }
      : refused('duplicate', r.message);
  }

  /**
   * Claim before start (DESIGN §4): raises `scope`'s mark to `token` with this fence's
   * policy and no request, in the scope's turn — after the request of this scope in progress
   * in this process has finished, so that once it answers `applied` no request with a lower
   * token reaches your handler any more, even before this token's first request. Under `>`
   * that first request still passes. See `MarkStore.claim` for the rule. Throws
   * `ERR_INVALID_ARGUMENT` for a malformed scope or token (a string must be a canonical
   * decimal), `ERR_UNAVAILABLE` when the mark store fails or too many requests wait for the
   * scope.
   *
   * @example
   * const r = await fence.claim('report/july', lease.token);
   */
  async claim(scope: string, token: bigint | string): Promise<ClaimResult> {
    const s = validateKey(scope, 'scope');
    const t = parseToken(token);
    const queued = this.queue.run(s, () => this.marks.claim(s, t, this.policy));
    if (queued === undefined)
      throw new LeaseholdError('ERR_UNAVAILABLE', `too many requests wait for scope ${s}`);
    const r = await queued;
    tellDecision(this.onDecision, claimDecision(s, t, r));
    return r;
  }

  /** Decides one request of `scope` with these request headers. Never throws. */
  enter(
    scope: string,
    headers: Readonly<Record<string, string | string[] | undefined>>,
  ): Promise<HttpFenceEntry> {
    try {
      // The scope function's answer is input like any other: a scope the mark stores (and the
      // gateway) would refuse is refused here, before anything runs.
      validateKey(scope, 'scope');
    } catch (err) {
      return Promise.resolve(refused('invalid_argument', (err as Error).message));
    }
    const fields = parseFenceHeaders(headers, this.names);
    if (fields.status === 'invalid')
      return Promise.resolve(refused('invalid_argument', fields.message));
    const { token, idempotencyKey: key, expectedVersion } = fields;
    return new Promise<HttpFenceEntry>((resolve) => {
      const queued = this.queue.run(scope, async () => {
        let decision;
        try {
          decision = await this.marks.check({
            scope,
            token,
            policy: this.policy,
            ...(key === undefined ? {} : { idempotencyKey: key }),
            ...(expectedVersion === undefined ? {} : { expectedVersion }),
          });
        } catch (err) {
          resolve(
            refused(
              'unavailable',
              isLeaseholdError(err) ? 'the mark store is unavailable' : 'internal error',
            ),
          );
          return;
        }
        if (decision.status !== 'version_mismatch')
          tellDecision(this.onDecision, {
            scope,
            token,
            status: decision.status,
            ...(decision.status === 'stale_fence' ? { highWaterMark: decision.highWaterMark } : {}),
          });
        switch (decision.status) {
          case 'stale_fence':
            return resolve(
              refused(
                'stale_fence',
                `token ${token} is below the scope's mark ${decision.highWaterMark}`,
                {
                  [MARK_HEADER]: decision.highWaterMark.toString(),
                },
              ),
            );
          case 'version_mismatch':
            return resolve(
              refused(
                'version_mismatch',
                `scope ${scope} is at version ${decision.version}, not ${expectedVersion}`,
                {
                  [VERSION_HEADER]: decision.version.toString(),
                },
              ),
            );
          case 'duplicate':
            return resolve(await this.replay(scope, token, key));
          case 'applied': {
            let finished!: (answer: AnswerRecord | number | undefined) => void;
            const over = new Promise<AnswerRecord | number | undefined>((r) => (finished = r));
            resolve({
              status: 'pass',
              version: decision.version,
              capture: key !== undefined,
              done: (answer) => finished(answer),
            });
            // The scope stays held until the response finished and its answer is recorded, so a
            // retry of the key (queued behind it) finds the answer.
            const answer = await over;
            if (key !== undefined) {
              const record: AnswerRecord =
                typeof answer === 'object'
                  ? answer
                  : answer === undefined
                    ? { state: 'unknown' }
                    : { state: 'answered', status: answer, headers: {}, body: undefined };
              await this.marks.saveAnswer(scope, token, key, record).catch(() => undefined);
            }
          }
        }
      });
      if (queued === undefined)
        resolve(
          refused('busy', `too many requests wait for scope ${scope}`, { 'retry-after': '1' }),
        );
    });
  }
}
