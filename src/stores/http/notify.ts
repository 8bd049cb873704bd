import type { IncomingMessage } from 'node:http';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { LeaseholdError } from '../../core/errors.js';
import { linkSignals } from '../../core/runtime/signals.js';
import type { Unwatch, WatchChange } from '../../core/store.js';
import type { StreamTransport } from './client.js';
import { describe, unexpectedAnswer } from './errors.js';

/** One server-sent event. */
export interface SseFrame {
  /** The event's type: its `event:` field, `message` when it has none. */
  readonly event: string;
  readonly data: string;
  /** The event's `id:` field, when it has one. */
  readonly id?: string | undefined;
}

/** Options of {@link readSse}. */
export interface ReadSseOptions {
  /** Called with the reconnection time in ms each time the stream sends a `retry:` field. */
  readonly onRetry?: (ms: number) => void;
  /**
   * The most characters one unfinished line or event may buffer; past it the stream fails
   * (the generator throws `ERR_UNAVAILABLE`) rather than growing without bound. Defaults to
   * 1 MiB.
   */
  readonly maxBufferSize?: number;
}

const DEFAULT_MAX_BUFFER = 1 << 20;

/**
 * Reads server-sent events from a response body until it ends or fails, as the HTML
 * EventSource rules define them (parsed by `eventsource-parser`): lines end in LF, CRLF or
 * CR, comments and unknown fields are skipped, an event is dispatched at a blank line when
 * it has data. Throws `ERR_UNAVAILABLE` when an event grows past `maxBufferSize`.
 *
 * @example
 * for await (const frame of readSse(res, { onRetry: (ms) => (retryMs = ms) })) {
 *   if (frame.id !== undefined) lastEventId = frame.id;
 * }
 */
export async function* readSse(
  body: AsyncIterable<Uint8Array>,
  options: ReadSseOptions = {},
): AsyncGenerator<SseFrame> {
  const ready: SseFrame[] = [];
  let overflow: string | undefined;
  const maxBufferSize = options.maxBufferSize ?? DEFAULT_MAX_BUFFER;
  const parser = createParser({
    onEvent: (m: EventSourceMessage) => {
      ready.push({ event: m.event ?? 'message', data: m.data, id: m.id });
    },
    onRetry: (ms) => options.onRetry?.(ms),
    onError: (err) => {
      // Unknown fields and bad `retry:` values are ignored, as EventSource does; only an
      // event too large to buffer ends the stream.
      if (err.type === 'max-buffer-size-exceeded') overflow = err.message;
    },
    maxBufferSize,
  });
  const decoder = new TextDecoder();
  const drain = function* (): Generator<SseFrame> {
    while (ready.length > 0) yield ready.shift()!;
    if (overflow !== undefined) {
      throw new LeaseholdError('ERR_UNAVAILABLE', `event stream: ${overflow}`);
    }
  };
  for await (const chunk of body) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    yield* drain();
  }
  parser.feed(decoder.decode());
  yield* drain();
}

/**
 * Events after which the key may be free. `renewed` never frees it; `changed` without a token
 * (the store's own notification, relayed when the key is free) may mean anything, so it wakes
 * too. `acquired`, and `changed` with a token (a grant the server learnt of from its store),
 * tell of a grant: the watch reports them as `'granted'`.
 */
const FREEING_EVENTS: ReadonlySet<string> = new Set(['released', 'expired', 'lost']);

/** First reconnect delay of a dropped event stream until the server sends `retry:`. */
const DEFAULT_RETRY_MS = 100;
/** Repeated reconnect failures back off up to this (or the server's `retry:`, if longer). */
const MAX_RETRY_MS = 2000;

/** What {@link watchKey} needs from its store. */
export interface KeyWatchSource {
  /** The server's base URL, for error messages. */
  readonly url: string;
  readonly streams: StreamTransport;
  /** Headers of every request (`authorization` among them). */
  readonly headers: Readonly<Record<string, string>>;
  /** Fires when the store closes: every watch ends. */
  readonly closing: AbortSignal;
}

/**
 * Subscribes to the server's event stream for `key`; resolves once the server says the
 * subscription is live. Releases, expiries and the store's own notifications call
 * `onChange()`, grants `onChange('granted')`. If the stream drops, `onChange` is called (a
 * spurious wake-up is allowed) and the stream is re-opened until unwatched, after the
 * server's `retry:` time (doubling on repeated failures), with `Last-Event-ID` set to the
 * last event id seen.
 */
export async function watchKey(
  source: KeyWatchSource,
  key: string,
  onChange: (change?: WatchChange) => void,
): Promise<Unwatch> {
  const stop = new AbortController();
  // Lives as long as the watch; detached when it stops.
  const { signal, dispose } = linkSignals([stop.signal, source.closing]);
  const path = `/v1/events?${new URLSearchParams({ key }).toString()}`;
  let lastEventId: string | undefined;
  let retryMs = DEFAULT_RETRY_MS;
  const open = async (): Promise<AsyncGenerator<SseFrame>> => {
    let res: IncomingMessage;
    const headers: Record<string, string> = { ...source.headers, accept: 'text/event-stream' };
    if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
    try {
      res = await source.streams.stream(path, headers, signal);
    } catch (err) {
      throw new LeaseholdError('ERR_UNAVAILABLE', `cannot reach ${source.url}: ${describe(err)}`, {
        cause: err,
      });
    }
    if (res.statusCode !== 200) {
      let text = '';
      for await (const c of res) text += String(c);
      throw unexpectedAnswer({ status: res.statusCode ?? 0, body: parseObject(text) }, 'watch');
    }
    const frames = readSse(res, { onRetry: (ms) => (retryMs = ms) });
    for (;;) {
      const first = await frames.next();
      if (first.done === true)
        throw new LeaseholdError('ERR_UNAVAILABLE', 'event stream ended before it was ready');
      if (first.value.id !== undefined) lastEventId = first.value.id;
      if (first.value.event === 'ready') return frames;
    }
  };
  // A release usually arrives as `released` plus the store's own `changed` in one chunk:
  // wake the waiter once for both, or every waiter on a hot key re-checks twice. A grant in
  // the same turn as a release is reported as the release (the key may be free again).
  let pending: 'freed' | 'granted' | undefined;
  const wake = (kind: 'freed' | 'granted'): void => {
    const first = pending === undefined;
    if (kind === 'freed' || first) pending = kind;
    if (!first) return;
    setImmediate(() => {
      const k = pending;
      pending = undefined;
      if (signal.aborted) return;
      if (k === 'granted') onChange('granted');
      else onChange();
    });
  };
  const pump = async (frames: AsyncGenerator<SseFrame>): Promise<void> => {
    for (let attempt = 0; !signal.aborted; attempt++) {
      try {
        for await (const f of frames) {
          attempt = 0;
          if (f.id !== undefined) lastEventId = f.id;
          const kind = changeOf(f);
          if (kind !== undefined) wake(kind);
        }
      } catch {
        // dropped: fall through to reconnect
      }
      if (signal.aborted) return;
      // Events sent while the stream was down are not replayed: wake the waiter to re-check.
      onChange();
      const delay = Math.min(Math.max(MAX_RETRY_MS, retryMs), retryMs * 2 ** attempt);
      await new Promise((r) => setTimeout(r, delay).unref());
      if (signal.aborted) return;
      try {
        frames = await open();
      } catch {
        frames = (async function* () {})();
      }
    }
  };
  let frames: AsyncGenerator<SseFrame>;
  try {
    frames = await open();
  } catch (err) {
    stop.abort();
    dispose();
    throw err;
  }
  void pump(frames);
  return () => {
    stop.abort();
    dispose();
  };
}

function parseObject(text: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** What one event on a key's stream says about the key, if anything. */
function changeOf(f: SseFrame): 'freed' | 'granted' | undefined {
  if (FREEING_EVENTS.has(f.event)) return 'freed';
  if (f.event === 'acquired') return 'granted';
  if (f.event !== 'changed') return undefined;
  // `changed` carries the holder's token when the server saw the key granted, none when free.
  try {
    const data = JSON.parse(f.data) as { token?: unknown };
    return typeof data.token === 'string' ? 'granted' : 'freed';
  } catch {
    return 'freed';
  }
}
