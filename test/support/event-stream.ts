import assert from 'node:assert/strict';
import { readSse, type SseFrame } from '../../src/stores/http/notify.js';

/** An open `/v1/events` stream: the frames received so far, and how to close it. */
export interface OpenEventStream {
  readonly frames: SseFrame[];
  close(): void;
}

/**
 * Opens `GET /v1/events?query` (with a bearer token when given), checks that it is an event
 * stream whose first event is `ready`, and collects the frames that follow until closed.
 */
export async function openEvents(
  url: string,
  query: string,
  token?: string,
): Promise<OpenEventStream> {
  const ac = new AbortController();
  const res = await fetch(`${url}/v1/events?${query}`, {
    signal: ac.signal,
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
  const it = readSse(res.body as unknown as AsyncIterable<Uint8Array>);
  const first = await it.next();
  assert.equal(
    first.done === true ? 'end' : first.value.event,
    'ready',
    'the first event is ready',
  );
  const frames: SseFrame[] = [];
  void (async () => {
    try {
      for await (const f of it) frames.push(f);
    } catch {
      // closed
    }
  })();
  return { frames, close: () => ac.abort() };
}
