import type { Logger } from '../core/events.js';

/**
 * Runs `once` until `signal` fires: again at once after a job, after `idleMs` when the queue
 * was empty or the fetch threw (logged). Resolves when stopped; never rejects.
 */
export async function pollLoop(
  once: () => Promise<unknown>,
  idleMs: number,
  signal: AbortSignal,
  logger: Logger,
): Promise<void> {
  while (!signal.aborted) {
    let worked = false;
    try {
      worked = (await once()) !== undefined;
    } catch (err) {
      logger.warn({ err }, 'job fetch failed');
    }
    if (!worked && !signal.aborted) await pause(idleMs, signal);
  }
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** A handler's error as a queue can store it (an Error's own fields are not enumerable). */
export function errorPayload(err: unknown): { message: string; name?: string } {
  if (err instanceof Error) return { name: err.name, message: err.message };
  return { message: String(err) };
}
