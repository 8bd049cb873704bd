import type { RedisClient } from '../../drivers/redis/client.js';

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
 * A turn's commands leave in writes of at most {@link FLUSH_EVERY}: one write for the whole
 * turn made Redis wait until the client had produced every command of it, and the client
 * wait while Redis ran them all, so neither overlapped the other (32 leases in flight ran at
 * about half the raw `SET NX PX` + `DEL` rate; in writes of 8 at about its rate, for the
 * same CPU per cycle). See docs/decisions/005-redis-write-coalescing.md.
 *
 * A lone command is delayed only to the end of the current turn (no timer, no extra loop
 * iteration). Commands keep their order: the socket is the same, only the flush is later.
 * Cork and uncork are counted by Node, so a user who corks the same client is unaffected.
 * Clients without a single socket (Cluster) are left alone.
 */
export class WriteCoalescer {
  private held: Corkable | undefined;
  /** Commands waiting in the corked socket. */
  private queued = 0;
  private readonly release = (): void => {
    const stream = this.held;
    this.held = undefined;
    stream?.uncork();
  };

  constructor(private readonly redis: RedisClient) {}

  /** Call right before sending a command: its write waits for the end of this turn at most. */
  hold(): void {
    if (this.held !== undefined) {
      if (++this.queued <= FLUSH_EVERY) return;
      // Send what is queued now, and keep the socket corked for the rest of the turn.
      this.held.uncork();
      this.held.cork();
      this.queued = 1;
      return;
    }
    // Nothing in flight on the connection: no reply can arrive in this turn to resolve more
    // commands, so this one is most likely alone (one worker) and goes out at once, without
    // the cork, the nextTick and the deferred write. Any command sent after it in this turn
    // finds it in flight and corks as before, so a burst still leaves in writes of 8.
    if (inFlight(this.redis) === 0) return;
    const stream = socketOf(this.redis);
    if (stream === undefined) return;
    stream.cork();
    this.held = stream;
    this.queued = 1;
    process.nextTick(this.release);
  }
}

/** The most commands one coalesced write carries (measured best of 2, 4, 6, 8, 16, 32). */
export const FLUSH_EVERY = 8;

/**
 * Commands sent on the connection whose replies have not been read yet (ioredis' own
 * `commandQueue`, which shifts a command before its reply resolves it); unknown (a client
 * without that queue) counts as some, so that such clients cork as before.
 */
function inFlight(redis: RedisClient): number {
  const queue = (redis as { commandQueue?: { length?: unknown } }).commandQueue;
  return typeof queue?.length === 'number' ? queue.length : 1;
}

function socketOf(redis: RedisClient): Corkable | undefined {
  // `stream` is ioredis' socket (net or TLS) while connected; a Cluster has none of its own.
  const stream = (redis as { stream?: Partial<Corkable> & { writable?: boolean } }).stream;
  if (stream === undefined || stream === null || stream.writable !== true) return undefined;
  if (typeof stream.cork !== 'function' || typeof stream.uncork !== 'function') return undefined;
  return stream as Corkable;
}
