import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { LeaseholdError } from '../../core/errors.js';

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
