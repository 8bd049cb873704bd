import type { HolderInfo, Token } from './types.js';
import type { LossReason } from './results.js';

/** A structured logger; pino's methods fit as they are. Never given secrets or full lease ids. */
export interface Logger {
  debug(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/**
 * False when a debug line would be dropped anyway (the silent default, or a pino logger above
 * debug level): hot paths skip building its fields.
 */
export function debugEnabled(logger: Logger): boolean {
  if (logger === silentLogger) return false;
  const check = (logger as { isLevelEnabled?: (level: string) => boolean }).isLevelEnabled;
  return typeof check === 'function' ? check.call(logger, 'debug') : true;
}

/** A logger that drops everything: the default. */
export const silentLogger: Logger = Object.freeze({
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
});

interface Base {
  readonly key: string;
  readonly ownerId: string;
}

/** Everything a client reports; the `type` strings match results, logs and metric labels. */
export type LeaseEvent =
  | (Base & {
      readonly type: 'acquired';
      readonly token: Token;
      readonly leaseIdPrefix: string;
      readonly waitedMs: number;
    })
  | (Base & { readonly type: 'busy'; readonly holder: HolderInfo; readonly waitedMs: number })
  | (Base & { readonly type: 'unavailable'; readonly cause: unknown })
  | (Base & {
      readonly type: 'renewed';
      readonly token: Token;
      readonly leaseIdPrefix: string;
      readonly latencyMs: number;
      readonly lateMs: number;
    })
  | (Base & {
      readonly type: 'renew_failed';
      readonly token: Token;
      readonly leaseIdPrefix: string;
      readonly cause: unknown;
    })
  | (Base & {
      readonly type: 'lost';
      readonly token: Token;
      readonly leaseIdPrefix: string;
      readonly reason: LossReason;
      readonly heldMs: number;
    })
  | (Base & {
      readonly type: 'released';
      readonly token: Token;
      readonly leaseIdPrefix: string;
      readonly result: 'released' | 'not_owner' | 'unavailable';
      readonly heldMs: number;
    });

/** The `type` of a {@link LeaseEvent}: `acquired`, `renewed`, `lost`, `released`, … */
export type LeaseEventType = LeaseEvent['type'];
export type LeaseEventOf<T extends LeaseEventType> = Extract<LeaseEvent, { type: T }>;

/** A small typed event hub. A throwing listener is logged and never breaks lease handling. */
export class LeaseEvents {
  private readonly listeners = new Map<LeaseEventType | '*', Set<(e: LeaseEvent) => void>>();
  private count = 0;

  constructor(private readonly logger: Logger) {}

  on<T extends LeaseEventType>(
    type: T | '*',
    listener: (event: LeaseEventOf<T>) => void,
  ): () => void {
    let set = this.listeners.get(type);
    if (set === undefined) this.listeners.set(type, (set = new Set()));
    const l = listener as (e: LeaseEvent) => void;
    set.add(l);
    this.count++;
    return () => {
      if (set.delete(l)) this.count--;
    };
  }

  /** True when anyone listens: callers skip building events nobody reads (hot paths). */
  get active(): boolean {
    return this.count > 0;
  }

  emit(event: LeaseEvent): void {
    for (const type of [event.type, '*'] as const) {
      const set = this.listeners.get(type);
      if (set === undefined) continue;
      for (const listener of set) {
        try {
          listener(event);
        } catch (err) {
          this.logger.error({ err, event: event.type }, 'lease event listener threw');
        }
      }
    }
  }
}
