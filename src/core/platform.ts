/**
 * Node's `process`, or undefined in a browser. The core reaches Node-only modules through it
 * (`process.getBuiltinModule`, Node ≥ 20.16) instead of importing them, so the core and the
 * simulation have no static `node:` imports and load as browser modules (the lesson page runs
 * the simulation itself).
 */
export function nodeProcess(): NodeJS.Process | undefined {
  return (globalThis as { process?: NodeJS.Process }).process;
}

/**
 * Resolves once pending promise jobs have run: a macrotask turn (`setImmediate` in Node, a
 * `MessageChannel` message in a browser), so everything already queued as a microtask, and
 * what those queue, runs first.
 */
export function nextMacrotask(): Promise<void> {
  const g = globalThis as { setImmediate?: (fn: () => void) => unknown };
  if (g.setImmediate !== undefined) {
    const setImmediate = g.setImmediate;
    return new Promise<void>((resolve) => setImmediate(resolve));
  }
  return new Promise<void>((resolve) => {
    // The browser's MessageChannel (Node's types describe the worker_threads one).
    const channel = new MessageChannel() as unknown as BrowserChannel;
    channel.port1.onmessage = () => {
      channel.port1.close();
      resolve();
    };
    channel.port2.postMessage(undefined);
  });
}

interface BrowserChannel {
  readonly port1: { onmessage: (() => void) | null; close(): void };
  readonly port2: { postMessage(message: unknown): void };
}

const encoder = new TextEncoder();

/** The UTF-8 encoding of `s` (lone surrogates become U+FFFD, as with Node's `Buffer`). */
export function utf8(s: string): Uint8Array {
  return encoder.encode(s);
}

/** The length of `s` in UTF-8 bytes, counted without encoding (lone surrogates as 3, like U+FFFD). */
export function utf8ByteLength(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

/** Compares two byte strings lexicographically (like `Buffer.compare`): −1, 0 or 1. */
export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a[i] as number;
    const y = b[i] as number;
    if (x !== y) return x < y ? -1 : 1;
  }
  return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
}
