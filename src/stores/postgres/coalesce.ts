import { LeaseholdError } from '../../core/errors.js';

/**
 * How one kind of request reaches the database: alone, or several in one statement.
 * `many` answers one result per request, in the order given, or throws for all of them.
 */
export interface BatchSenders<Req, Res> {
  /** One request in its own statement: what the store sends when nothing is queued. */
  one(req: Req, timeoutMs: number): Promise<Res>;
  /** Several requests in one statement (one transaction, one commit, one round trip). */
  many(reqs: readonly Req[], timeoutMs: number): Promise<Res[]>;
  /**
   * Whether the requests of a failed `many` may be sent again one by one: the statement
   * surely committed nothing, or sending again is harmless (a grant with the same lease id
   * answers the grant it already made).
   */
  retryAlone(err: unknown): boolean;
}

/**
 * A statement out longer than this gives up its slot (it still answers its own requests), so
 * that a grant waiting on a row lock — a key locked by someone else's transaction — holds up
 * the other keys' requests for this long at most, not for its whole timeout. A batch's round
 * trip is about a millisecond on an idle machine and a few tens under heavy load.
 */
const STALLED_MS = 50;

interface Queued<Req, Res> {
  readonly req: Req;
  /** performance.now() after which the caller no longer waits (its request timeout). */
  readonly deadline: number;
  readonly resolve: (res: Res) => void;
  readonly reject: (err: unknown) => void;
}

/**
 * Coalesces the requests of one kind from the callers of one store (decision 017). Requests
 * made in one turn of the event loop go out together at its end (`process.nextTick`, after
 * the promise continuations of that turn: no timer, no added wait for a lone caller), in one
 * statement of up to `maxBatch` requests, while fewer than `maxInFlight` statements of this
 * kind are out. Requests that find every slot taken queue, and go out together when a
 * statement answers. So with one caller nothing changes but the statement's timing within
 * the turn, and with many every statement, transaction and WAL flush is shared by all the
 * requests that were waiting for a slot.
 *
 * A statement that takes longer than STALLED_MS stops counting against `maxInFlight`.
 *
 * Each request keeps its own answer and its own timeout: a request still queued when its
 * timeout passes is answered `ERR_UNAVAILABLE` without being sent, and a batch's statement
 * timeout is the longest remaining timeout of its requests (a caller that gave up earlier
 * has stopped listening; the client releases a grant that comes too late).
 */
export class Coalescer<Req, Res> {
  private readonly queue: Array<Queued<Req, Res>> = [];
  private inFlight = 0;
  private scheduled = false;
  /** Statements sent with more than one request; for tests and diagnostics. */
  batches = 0;

  constructor(
    private readonly senders: BatchSenders<Req, Res>,
    private readonly maxInFlight: number,
    private readonly maxBatch: number,
    private readonly what: string,
  ) {}

  submit(req: Req, timeoutMs: number): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      this.queue.push({ req, deadline: performance.now() + timeoutMs, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.maxInFlight) return;
    this.scheduled = true;
    process.nextTick(this.flush);
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const now = performance.now();
      const batch: Array<Queued<Req, Res>> = [];
      for (const q of this.queue.splice(0, this.maxBatch)) {
        if (q.deadline > now) batch.push(q);
        else q.reject(this.expired());
      }
      if (batch.length === 0) continue;
      this.inFlight++;
      let holding = true;
      const free = (): void => {
        if (!holding) return;
        holding = false;
        this.inFlight--;
        // At the end of this turn, so that the requests its answers lead to join the next.
        if (this.queue.length > 0) this.schedule();
      };
      const stalled = setTimeout(free, STALLED_MS);
      // A slow statement must not keep a process alive that has nothing else to do.
      stalled.unref();
      void this.send(batch, now).finally(() => {
        clearTimeout(stalled);
        free();
      });
    }
  };

  private async send(batch: ReadonlyArray<Queued<Req, Res>>, now: number): Promise<void> {
    let longest = 1;
    for (const q of batch) longest = Math.max(longest, q.deadline - now);
    if (batch.length === 1) {
      const q = batch[0]!;
      await this.senders.one(q.req, longest).then(q.resolve, q.reject);
      return;
    }
    this.batches++;
    let answers: Res[];
    try {
      answers = await this.senders.many(
        batch.map((q) => q.req),
        longest,
      );
    } catch (err) {
      if (!this.senders.retryAlone(err)) {
        for (const q of batch) q.reject(err);
        return;
      }
      // One request may be the cause (a key whose token space is exhausted, a lock timeout on
      // one row): each goes again alone, under what is left of its own timeout.
      await Promise.all(
        batch.map((q) => {
          const left = q.deadline - performance.now();
          if (left <= 0) {
            q.reject(this.expired());
            return Promise.resolve();
          }
          return this.senders.one(q.req, left).then(q.resolve, q.reject);
        }),
      );
      return;
    }
    batch.forEach((q, i) => q.resolve(answers[i]!));
  }

  private expired(): LeaseholdError {
    return new LeaseholdError(
      'ERR_UNAVAILABLE',
      `${this.what}: the request's timeout passed while it waited for its statement`,
    );
  }
}
