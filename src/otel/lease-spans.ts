import {
  context,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Link,
  type Span,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';
import type { FencedWriteEnd, FenceWatcher } from '../metrics/fence-wrap.js';
import type { LeaseObservation } from '../metrics/lease-observer.js';

/** The span names. */
export const SPAN_NAMES = Object.freeze({
  acquire: 'leasehold.acquire',
  renew: 'leasehold.renew',
  release: 'leasehold.release',
  fencedWrite: 'leasehold.fenced_write',
});

/** The span attributes. Tokens are decimal strings: they are 64-bit, past a double's range. */
export const SPAN_ATTRIBUTES = Object.freeze({
  key: 'leasehold.key',
  owner: 'leasehold.owner',
  token: 'leasehold.token',
  leaseIdPrefix: 'leasehold.lease_id_prefix',
  result: 'leasehold.result',
  holderOwner: 'leasehold.holder.owner',
  holderToken: 'leasehold.holder.token',
  slackMs: 'leasehold.renewal.slack_ms',
  lateMs: 'leasehold.renewal.late_ms',
  lossReason: 'leasehold.loss_reason',
  heldMs: 'leasehold.held_ms',
  scope: 'leasehold.scope',
  fenceMethod: 'leasehold.fence.method',
  highWaterMark: 'leasehold.high_water_mark',
});

const A = SPAN_ATTRIBUTES;

/** Epoch milliseconds with sub-millisecond precision, as OpenTelemetry takes times. */
const wallNow = (): number => performance.timeOrigin + performance.now();

const leaseKey = (key: string, token: bigint): string => `${key}\u0000${token}`;

/**
 * Spans for a lease client's operations, made from its events. An event arrives when an
 * operation has answered, so each span is started back-dated by the duration the event
 * reports (an acquisition's wait, a renewal's round trip) and ended at once. Events that
 * report no duration (an unavailable acquisition, a failed renewal, a release) give spans
 * that mark the moment of the answer.
 *
 * Parents: an acquisition and a release are children of the context active where they were
 * called; background renewals are roots of their own traces, linked to their lease's
 * acquisition, so that a lease held for hours does not make one endless trace.
 */
export class LeaseSpans {
  /** The acquisition span of each held lease, for links: forgotten when the lease ends. */
  private readonly acquisitions = new Map<string, SpanContext>();

  constructor(private readonly tracer: Tracer) {}

  observe(o: LeaseObservation): void {
    const end = wallNow();
    const e = o.event;
    const base: Attributes = { [A.key]: e.key, [A.owner]: e.ownerId };
    switch (o.kind) {
      case 'acquire': {
        const ev = o.event;
        const attributes: Attributes = { ...base, [A.result]: ev.type };
        if (ev.type === 'acquired') {
          attributes[A.token] = ev.token.toString();
          attributes[A.leaseIdPrefix] = ev.leaseIdPrefix;
        } else if (ev.type === 'busy') {
          attributes[A.holderOwner] = ev.holder.ownerId;
          attributes[A.holderToken] = ev.holder.token.toString();
        }
        const span = this.tracer.startSpan(SPAN_NAMES.acquire, {
          kind: SpanKind.CLIENT,
          startTime: end - (ev.type === 'unavailable' ? 0 : ev.waitedMs),
          attributes,
        });
        if (ev.type === 'acquired') {
          this.acquisitions.set(leaseKey(ev.key, ev.token), span.spanContext());
        } else if (ev.type === 'unavailable') {
          failed(span, ev.cause);
        }
        span.end(end);
        return;
      }
      case 'renew': {
        const ev = o.event;
        const attributes: Attributes = {
          ...base,
          [A.token]: ev.token.toString(),
          [A.leaseIdPrefix]: ev.leaseIdPrefix,
          [A.result]: o.result,
        };
        if (ev.type === 'renewed') attributes[A.lateMs] = ev.lateMs;
        if (ev.type === 'lost') attributes[A.lossReason] = ev.reason;
        if (o.slackMs !== undefined) attributes[A.slackMs] = o.slackMs;
        const span = this.tracer.startSpan(SPAN_NAMES.renew, {
          kind: SpanKind.CLIENT,
          root: true,
          startTime: end - (ev.type === 'renewed' ? ev.latencyMs : 0),
          attributes,
          links: this.linkTo(ev.key, ev.token),
        });
        if (ev.type === 'renew_failed') failed(span, ev.cause);
        span.end(end);
        return;
      }
      case 'loss':
        this.acquisitions.delete(leaseKey(e.key, o.event.token));
        return;
      case 'release': {
        const ev = o.event;
        const attributes: Attributes = {
          ...base,
          [A.token]: ev.token.toString(),
          [A.leaseIdPrefix]: ev.leaseIdPrefix,
          [A.result]: ev.result,
        };
        if (o.heldMs !== undefined) attributes[A.heldMs] = o.heldMs;
        const span = this.tracer.startSpan(SPAN_NAMES.release, {
          kind: SpanKind.CLIENT,
          startTime: end,
          attributes,
          links: this.linkTo(ev.key, ev.token),
        });
        this.acquisitions.delete(leaseKey(ev.key, ev.token));
        if (ev.result === 'unavailable') span.setStatus({ code: SpanStatusCode.ERROR });
        span.end(end);
        return;
      }
    }
  }

  /**
   * A fence watcher that makes one span per fenced write, active while the write runs (so
   * the database client's own spans nest under it).
   */
  fenceWatcher(ownerId: string | undefined): FenceWatcher {
    return {
      start: ({ method, scope, token }) => {
        const attributes: Attributes = {
          [A.scope]: scope,
          [A.token]: token.toString(),
          [A.fenceMethod]: method,
        };
        if (ownerId !== undefined) attributes[A.owner] = ownerId;
        const span = this.tracer.startSpan(SPAN_NAMES.fencedWrite, {
          kind: SpanKind.CLIENT,
          attributes,
        });
        const active = trace.setSpan(context.active(), span);
        return {
          run: (write) => context.with(active, write),
          end: (outcome: FencedWriteEnd) => {
            if (outcome.ok) {
              span.setAttribute(A.result, outcome.status);
              if (outcome.highWaterMark !== undefined) {
                span.setAttribute(A.highWaterMark, outcome.highWaterMark.toString());
              }
            } else {
              span.setAttribute(A.result, 'error');
              failed(span, outcome.error);
            }
            span.end();
          },
        };
      },
    };
  }

  private linkTo(key: string, token: bigint): Link[] | undefined {
    const acquired = this.acquisitions.get(leaseKey(key, token));
    return acquired === undefined ? undefined : [{ context: acquired }];
  }
}

function failed(span: Span, cause: unknown): void {
  if (cause instanceof Error) span.recordException(cause);
  span.setStatus({ code: SpanStatusCode.ERROR, message: String(cause) });
}
