import type { ServerResponse } from 'node:http';
import { MAX_STORED_ANSWER_BYTES, type AnswerRecord } from '../marks/mark-store.js';

/** Header telling a client that an idempotent request's answer is a replay, not a new call. */
export const REPLAYED_HEADER = 'idempotent-replayed';

/**
 * The answer headers kept with an idempotency key and replayed: the ones that describe the
 * body or the resource the first attempt made. Others (dates, connection, cookies, tracing)
 * belong to one exchange and are not replayed.
 */
export const REPLAYED_ANSWER_HEADERS: readonly string[] = Object.freeze([
  'content-type',
  'content-encoding',
  'content-language',
  'content-location',
  'location',
  'etag',
  'last-modified',
  'cache-control',
]);
const REPLAYED = new Set(REPLAYED_ANSWER_HEADERS);
/** A kept header value longer than this is dropped (it is not a header worth replaying). */
const MAX_HEADER_VALUE = 2048;

/** The {@link REPLAYED_ANSWER_HEADERS} of an answer, read with `get` (lower-case names). */
export function pickAnswerHeaders(
  get: (name: string) => number | string | readonly string[] | undefined,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of REPLAYED_ANSWER_HEADERS) {
    const v = get(name);
    const text = Array.isArray(v) ? v.join(', ') : v === undefined ? undefined : String(v);
    if (text !== undefined && text.length <= MAX_HEADER_VALUE) out[name] = text;
  }
  return out;
}

/** The same from undici's raw header list (name, value, name, value, …). */
export function pickRawAnswerHeaders(raw: readonly (Buffer | string)[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toString('latin1').toLowerCase();
    if (!REPLAYED.has(name)) continue;
    const value = raw[i + 1]!.toString('latin1');
    if (value.length > MAX_HEADER_VALUE) continue;
    out[name] = out[name] === undefined ? value : `${out[name]}, ${value}`;
  }
  return out;
}

/**
 * Collects an answer's body while it is sent, up to {@link MAX_STORED_ANSWER_BYTES}; beyond that
 * it keeps nothing (the answer is then not replayable, see {@link replayOf}).
 */
export class AnswerCapture {
  private chunks: Buffer[] = [];
  private size = 0;
  private over = false;

  add(chunk: Uint8Array): void {
    if (this.over) return;
    this.size += chunk.length;
    if (this.size > MAX_STORED_ANSWER_BYTES) {
      this.over = true;
      this.chunks = [];
    } else this.chunks.push(Buffer.from(chunk));
  }

  /** The whole body, or undefined when it was too large to keep. */
  body(): Buffer | undefined {
    return this.over ? undefined : Buffer.concat(this.chunks);
  }
}

/** What a retry of an idempotency key gets: the original answer again, or `duplicate`. */
export type Replay =
  | {
      readonly status: 'replay';
      readonly httpStatus: number;
      readonly headers: Readonly<Record<string, string>>;
      readonly body: Buffer;
    }
  | { readonly status: 'duplicate'; readonly message: string };

/**
 * Decides the answer to a retry from the key's record: an answer that was kept whole is
 * replayed (status, {@link REPLAYED_ANSWER_HEADERS}, body); anything else — still in flight,
 * fate unknown, or a body above {@link MAX_STORED_ANSWER_BYTES} — is `duplicate`, and the
 * request is not run again either way.
 */
export function replayOf(record: AnswerRecord | undefined): Replay {
  if (record?.state === 'answered' && record.body !== undefined)
    return {
      status: 'replay',
      httpStatus: record.status,
      headers: record.headers,
      body: record.body,
    };
  const why =
    record === undefined || record.state === 'pending'
      ? 'its first attempt is still in flight, or its outcome is unknown'
      : record.state === 'unknown'
        ? 'its first attempt may have been received but got no answer; it is not run again'
        : record.state === 'answered'
          ? `its first attempt was answered ${record.status}; the answer was larger than ${MAX_STORED_ANSWER_BYTES} bytes, too large to keep`
          : 'it was seen before';
  return {
    status: 'duplicate',
    message: `this idempotency key was used with this token before: ${why}`,
  };
}

type WriteCallback = (err?: Error | null) => void;

/**
 * Keeps what a handler sends on `res` (status, {@link REPLAYED_ANSWER_HEADERS}, the body up to
 * the bound) and resolves when the response ended: `answered` once it was sent whole,
 * `unknown` when the connection closed before (the handler may have done its work).
 */
export function captureAnswer(res: ServerResponse): Promise<AnswerRecord> {
  const capture = new AnswerCapture();
  const keep = (chunk: unknown, encoding: unknown): void => {
    if (typeof chunk === 'string')
      capture.add(Buffer.from(chunk, typeof encoding === 'string' ? (encoding as never) : 'utf8'));
    else if (chunk instanceof Uint8Array) capture.add(chunk);
  };
  // Fastify (and others) give the headers to writeHead() as an object, which Node does not
  // keep where getHeader() can read them back: take them as they pass.
  let written: Record<string, string> = {};
  const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => ServerResponse;
  res.writeHead = (...args: unknown[]) => {
    const h = args.find((a, i) => i > 0 && typeof a === 'object' && a !== null);
    if (Array.isArray(h)) written = pickRawAnswerHeaders(h.flat() as string[]);
    else if (h !== undefined) {
      const lower = new Map(
        Object.entries(h as Record<string, unknown>).map(([k, v]) => [k.toLowerCase(), v]),
      );
      written = pickAnswerHeaders((n) => lower.get(n) as string | undefined);
    }
    return writeHead(...args);
  };
  const write = res.write.bind(res) as (c: unknown, e?: unknown, cb?: WriteCallback) => boolean;
  const end = res.end.bind(res) as (c?: unknown, e?: unknown, cb?: () => void) => ServerResponse;
  res.write = ((chunk: unknown, encoding?: unknown, cb?: WriteCallback) => {
    keep(chunk, encoding);
    return write(chunk, encoding, cb);
  }) as ServerResponse['write'];
  res.end = ((chunk?: unknown, encoding?: unknown, cb?: () => void) => {
    if (typeof chunk !== 'function') keep(chunk, encoding);
    return end(chunk, encoding, cb);
  }) as ServerResponse['end'];
  return new Promise((resolve) => {
    res.once('finish', () =>
      resolve({
        state: 'answered',
        status: res.statusCode,
        headers: { ...pickAnswerHeaders((n) => res.getHeader(n)), ...written },
        body: capture.body(),
      }),
    );
    res.once('close', () => {
      if (!res.writableFinished) resolve({ state: 'unknown' });
    });
  });
}
