import type { RedisClient } from './scripts.js';

/** The part of a socket that coalescing uses. */
interface Corkable {
  cork(): void;
  uncork(): void;
}

/**
 * Coalesces the commands a store sends within one turn of the event loop into one socket
 * write. ioredis writes each command on its own (one `write()` system call per command, the
 * largest client cost of a lease cycle); with many leases in flight, the replies of one read
 * resolve many awaits, whose next commands all land in the same turn. Corking the socket
 * until `process.nextTick` — after every promise continuation of the turn has run — sends
 * them with one `writev()`, and Redis then answers them with one write too.
 *
 * A lone command is delayed only to the end of the current turn (no timer, no extra loop
 * iteration). Commands keep their order: the socket is the same, only the flush is later.
 * Cork and uncork are counted by Node, so a user who corks the same client is unaffected.
 * Clients without a single socket (Cluster) are left alone.
 */
export class WriteCoalescer {
  private held: Corkable | undefined;
  private readonly release = (): void => {
    const stream = this.held;
    this.held = undefined;
    stream?.uncork();
  };

  constructor(private readonly redis: RedisClient) {}

  /** Call right before sending a command: its write waits for the end of this turn. */
  hold(): void {
    if (this.held !== undefined) return;
    const stream = socketOf(this.redis);
    if (stream === undefined) return;
    stream.cork();
    this.held = stream;
    process.nextTick(this.release);
  }
}

function socketOf(redis: RedisClient): Corkable | undefined {
  // `stream` is ioredis' socket (net or TLS) while connected; a Cluster has none of its own.
  const stream = (redis as { stream?: Partial<Corkable> & { writable?: boolean } }).stream;
  if (stream === undefined || stream === null || stream.writable !== true) return undefined;
  if (typeof stream.cork !== 'function' || typeof stream.uncork !== 'function') return undefined;
  return stream as Corkable;
}
