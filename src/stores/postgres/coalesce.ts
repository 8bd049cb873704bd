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

/** A statement out that counts against `maxInFlight` until it answers or stalls. */
interface Slot {
  /** performance.now() when it was sent. */
  readonly sentAt: number;
}

/**
 * Coalesces the requests of one kind from the callers of one store (decision 017). While
 * fewer than `maxInFlight` statements of this kind are out, requests made in one turn of the
 * event loop go out together at its end (`process.nextTick`, after the promise continuations
 * of that turn: no timer), in one statement of up to `maxBatch` requests. Requests that find
 * every slot taken queue, and go out together when a statement answers. So with many callers
 * every statement, transaction and WAL flush is shared by all the requests that were waiting
 * for a slot.
 *
 * A caller that comes alone — a slot free, nothing queued, and the last statement of this
 * kind carried one request — is sent at once, within its own turn: one caller at a time (one
 * worker) pays no deferral and no timer (decision 022). When others follow in the same turn
 * they find the slot taken and go together when it answers, and the next statement is a
 * batch again, so a burst is coalesced from its second request on.
 *
 * A statement that takes longer than STALLED_MS stops counting against `maxInFlight`. The
 * timer that notices this runs only while requests queue behind a full set of slots (one
 * timer for all of them, not one per statement).
 *
 * Each request keeps its own answer and its own timeout: a request still queued when its
 * timeout passes is answered `ERR_UNAVAILABLE` without being sent, and a batch's statement
 * timeout is the longest remaining timeout of its requests (a caller that gave up earlier
 * has stopped listening; the client releases a grant that comes too late).
 */
export class Coalescer<Req, Res> {
  private readonly queue: Array<Queued<Req, Res>> = [];
  /** Statements out that hold a slot (a stalled one is removed while it is still out). */
  private readonly slots = new Set<Slot>();
  private scheduled = false;
  /** Whether the last statement sent carried one request (callers come one at a time). */
  private alone = true;
  private stallTimer: NodeJS.Timeout | undefined;
  /** Statements sent with more than one request; for tests and diagnostics. */
  batches = 0;
  /** Requests sent at once, without waiting for the end of their turn; for tests. */
  direct = 0;

  constructor(
    private readonly senders: BatchSenders<Req, Res>,
    private readonly maxInFlight: number,
    private readonly maxBatch: number,
    private readonly what: string,
  ) {}

  submit(req: Req, timeoutMs: number): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      const now = performance.now();
      const q: Queued<Req, Res> = { req, deadline: now + timeoutMs, resolve, reject };
      if (
        this.alone &&
        timeoutMs > 0 &&
        !this.scheduled &&
        this.queue.length === 0 &&
        this.slots.size < this.maxInFlight
      ) {
        this.direct++;
        this.start([q], now);
        return;
      }
      this.queue.push(q);
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    if (this.slots.size >= this.maxInFlight) {
      this.watchStalls();
      return;
    }
    this.scheduled = true;
    process.nextTick(this.flush);
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    while (this.slots.size < this.maxInFlight && this.queue.length > 0) {
      const now = performance.now();
      const batch: Array<Queued<Req, Res>> = [];
      for (const q of this.queue.splice(0, this.maxBatch)) {
        if (q.deadline > now) batch.push(q);
        else q.reject(this.expired());
      }
      if (batch.length > 0) this.start(batch, now);
    }
    if (this.queue.length > 0) this.watchStalls();
  };

  private start(batch: ReadonlyArray<Queued<Req, Res>>, now: number): void {
    const slot: Slot = { sentAt: now };
    this.slots.add(slot);
    this.alone = batch.length === 1;
    void this.send(batch, now).finally(() => {
      if (!this.slots.delete(slot)) return; // it stalled and gave up its slot already
      if (this.slots.size === 0 && this.stallTimer !== undefined) {
        clearTimeout(this.stallTimer);
        this.stallTimer = undefined;
      }
      // At the end of this turn, so that the requests its answers lead to join the next.
      if (this.queue.length > 0) this.schedule();
    });
  }

  /** Requests queue behind full slots: free a slot whose statement passes STALLED_MS. */
  private watchStalls(): void {
    if (this.stallTimer !== undefined || this.slots.size === 0) return;
    let oldest = Infinity;
    for (const s of this.slots) oldest = Math.min(oldest, s.sentAt);
    const delay = Math.max(0, Math.ceil(oldest + STALLED_MS - performance.now()));
    this.stallTimer = setTimeout(this.onStallTimer, delay);
    // A slow statement must not keep a process alive that has nothing else to do.
    this.stallTimer.unref();
  }

  private readonly onStallTimer = (): void => {
    this.stallTimer = undefined;
    const now = performance.now();
    for (const s of this.slots) if (now - s.sentAt >= STALLED_MS) this.slots.delete(s);
    // Sends what waits if a slot came free, or watches the statements still out.
    if (this.queue.length > 0) this.schedule();
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
