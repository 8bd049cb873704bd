import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { invalidArgument, LeaseholdError } from '../../core/errors.js';
import type { ClaimResult } from '../../core/results.js';
import { RedisFence } from '../redis.js';
import {
  MAX_STORED_ANSWER_BYTES,
  decideFromMark,
  decodeAnswerHeaders,
  encodeAnswerHeaders,
  type AnswerRecord,
  type MarkDecision,
  type MarkPolicy,
  type MarkRequest,
  type MarkStore,
} from './mark-store.js';

/** Options for {@link RedisMarkStore}. */
export interface RedisMarkStoreOptions {
  /** `redis://host:6379/0`. Give this or `redis`. */
  readonly url?: string;
  /** An ioredis client (not closed by the store). */
  readonly redis?: Redis;
  /** Key prefix (`<prefix>{<scope>}:hwm` …). No `{`/`}`. Defaults to `leasehold:gateway:`. */
  readonly prefix?: string;
  /** How long idempotency keys and their answers are kept (ms). Defaults to 24 h. */
  readonly idempotencyTtlMs?: number;
}

const MARK_WRITE = readFileSync(new URL('./scripts/mark-write.lua', import.meta.url), 'utf8');
const VERSION_ERROR = /LEASEHOLD_VERSION ([0-9]{1,20})/;

/**
 * Marks in Redis, on {@link RedisFence}: the fence's script compares and advances the mark,
 * and the gateway's own body (version, pending idempotency record) runs inside the same
 * script, so all of it happens in one atomic step. As durable as the Redis (use AOF with
 * `appendfsync always` for marks that must survive a restart).
 */
export class RedisMarkStore implements MarkStore {
  readonly kind = 'redis';
  private readonly redis: Redis;
  private readonly ownClient: boolean;
  private readonly prefix: string;
  private readonly ttlMs: number;
  private readonly fences: Record<MarkPolicy, RedisFence>;

  constructor(options: RedisMarkStoreOptions) {
    if ((options.url === undefined) === (options.redis === undefined))
      throw invalidArgument('url', 'give exactly one of url or redis', options.url);
    this.ownClient = options.redis === undefined;
    this.redis =
      options.redis ??
      new Redis(options.url as string, { lazyConnect: false, maxRetriesPerRequest: 2 });
    if (this.ownClient) this.redis.on('error', () => undefined);
    this.prefix = options.prefix ?? 'leasehold:gateway:';
    this.ttlMs = options.idempotencyTtlMs ?? 86_400_000;
    const base = { redis: this.redis, prefix: this.prefix, idempotencyTtlMs: this.ttlMs };
    this.fences = {
      '>=': new RedisFence({ ...base, policy: '>=' }),
      '>': new RedisFence({ ...base, policy: '>' }),
    };
  }

  private versionKey(scope: string): string {
    return `${this.prefix}{${scope}}:version`;
  }

  private answerKey(scope: string, token: bigint, key: string): string {
    return `${this.prefix}{${scope}}:answer:${token}:${key}`;
  }

  async check(request: MarkRequest): Promise<MarkDecision> {
    const { scope, token, idempotencyKey: key, expectedVersion } = request;
    const fence = this.fences[request.policy];
    const fast = decideFromMark(request, await fence.highWaterMark(scope), undefined);
    if (fast !== undefined) return fast;
    const vKey = this.versionKey(scope);
    try {
      const r = await fence.script<string>(
        scope,
        token,
        {
          body: MARK_WRITE,
          keys: [vKey, key === undefined ? vKey : this.answerKey(scope, token, key)],
          args: [expectedVersion?.toString() ?? '', key === undefined ? '0' : '1', this.ttlMs],
        },
        key === undefined ? {} : { idempotencyKey: key },
      );
      switch (r.status) {
        case 'applied':
          return {
            status: 'applied',
            wrote: true,
            version: r.value === '' ? undefined : BigInt(r.value),
          };
        case 'duplicate':
        case 'stale_fence':
          return r;
      }
    } catch (err) {
      const m = err instanceof LeaseholdError ? VERSION_ERROR.exec(String(err.cause)) : null;
      if (m?.[1] !== undefined) return { status: 'version_mismatch', version: BigInt(m[1]) };
      throw err;
    }
  }

  claim(scope: string, token: bigint, policy: MarkPolicy): Promise<ClaimResult> {
    return this.fences[policy].claim(scope, token);
  }

  async read(scope: string): Promise<{ highWaterMark: bigint; version: bigint }> {
    const highWaterMark = await this.fences['>='].highWaterMark(scope);
    const v = await this.call(() => this.redis.get(this.versionKey(scope)));
    return { highWaterMark, version: v === null ? 0n : BigInt(v) };
  }

  async answer(scope: string, token: bigint, key: string): Promise<AnswerRecord | undefined> {
    const k = this.answerKey(scope, token, key);
    const h = await this.call(() => this.redis.hgetallBuffer(k));
    const state = h['state']?.toString();
    if (state === undefined) return undefined;
    if (state === 'answered') {
      return {
        state: 'answered',
        status: Number(h['status']?.toString() ?? '200'),
        headers: decodeAnswerHeaders(h['headers']?.toString(), h['contentType']?.toString()),
        body: h['body'],
      };
    }
    return { state: state as 'pending' | 'not_sent' | 'unknown' };
  }

  async saveAnswer(scope: string, token: bigint, key: string, record: AnswerRecord): Promise<void> {
    const k = this.answerKey(scope, token, key);
    const fields: (string | Buffer)[] = ['state', record.state];
    if (record.state === 'answered') {
      fields.push('status', String(record.status));
      fields.push('headers', encodeAnswerHeaders(record.headers));
      if (record.body !== undefined && record.body.length <= MAX_STORED_ANSWER_BYTES)
        fields.push('body', record.body);
    }
    await this.call(() =>
      this.redis
        .multi()
        .del(k)
        .hset(k, ...fields)
        .pexpire(k, this.ttlMs)
        .exec(),
    );
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw new LeaseholdError('ERR_UNAVAILABLE', `Redis marks unavailable: ${String(err)}`, {
        cause: err,
      });
    }
  }

  async close(): Promise<void> {
    if (this.ownClient) await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
