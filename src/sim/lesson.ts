import type { CheckReport } from '../check/checker.js';
import type { HistoryEvent } from '../history/events.js';
import type { LessonFault } from './lesson-presets.js';
import { lessonVerdict, type LessonOutcome } from './lesson-verdict.js';
import { seconds } from './lesson-summary.js';
import { SimWorld } from './world.js';

export { formatTimeline, seconds, summarizeLesson, type LessonSummary } from './lesson-summary.js';
export { type LessonOutcome } from './lesson-verdict.js';
export {
  LESSON_FAULTS,
  LESSON_PRESETS,
  type LessonFault,
  type LessonPreset,
} from './lesson-presets.js';

/** Options for {@link runLessonStory}; the defaults are the lesson's numbers. */
export interface LessonOptions {
  /** Lease TTL. Defaults to 10 s. */
  readonly ttlMs?: number;
  /** A's renewal cadence. Defaults to 3 s. */
  readonly renewEveryMs?: number;
  /** When A stalls (after checking its lease, before its write leaves). Defaults to 2 s. */
  readonly freezeAtMs?: number;
  /** How long A stalls. Defaults to 12 s. */
  readonly pauseMs?: number;
  /** Whether storage checks fencing tokens. Defaults to true. */
  readonly fencing?: boolean;
  /** A's token; tokens before it count as already issued. Defaults to 33. */
  readonly firstToken?: bigint;
  /** When B starts trying (it waits for the lease). Defaults to 1 s. */
  readonly bStartsAtMs?: number;
  /** How long B works before writing. Defaults to 1 s. */
  readonly bWorkMs?: number;
  /**
   * Whether each worker claims its token at storage as it takes the lease, before it starts
   * (claim before start): storage then refuses every older token even before the new owner's
   * first write. Means nothing without fencing. Defaults to false.
   */
  readonly claim?: boolean;
  /**
   * What happens to A at `freezeAtMs` for `pauseMs`: `pause` (A's process stalls between
   * checking its lease and writing), `delayed_request` (A sends its write, and the network
   * holds all of A's traffic, renewals included), `lost_renewal` (A keeps working, its renewals
   * reach the lock service but their answers are lost). Defaults to `pause`.
   */
  readonly fault?: LessonFault;
}

/** The lesson's parameters with every default filled in (what the page and `demo --json` show). */
export interface LessonParameters {
  readonly ttlMs: number;
  readonly renewEveryMs: number;
  readonly freezeAtMs: number;
  readonly pauseMs: number;
  readonly fencing: boolean;
  readonly fault: LessonFault;
  readonly firstToken: string;
  readonly bWorkMs: number;
  readonly claim: boolean;
}

/**
 * What a timeline entry is, for drawing: a grant (with its token), A's fault starting and
 * ending, a write sent, storage accepting, overwriting or rejecting (`stale` marks the write
 * that carried an old token), the lease expiring at the store, A skipping its write.
 */
export type TimelineKind =
  | 'grant'
  | 'fault'
  | 'resume'
  | 'write'
  | 'accept'
  | 'overwrite'
  | 'reject'
  | 'expire'
  | 'skip'
  | 'claim'
  | 'other';

/** One line of the story, in virtual time. */
export interface TimelineEntry {
  readonly t: number;
  readonly actor: 'Worker A' | 'Worker B' | 'Lock' | 'Storage';
  readonly text: string;
  readonly kind: TimelineKind;
  /** The fencing token involved, as a decimal string. */
  readonly token?: string;
  /** True on storage's answer to a write whose token was older than one already accepted. */
  readonly stale?: boolean;
}

/** The story's outcome. */
export interface LessonResult {
  readonly parameters: LessonParameters;
  readonly timeline: readonly TimelineEntry[];
  /** The outcome in one plain sentence ("Storage rejected token 33 after 34."). */
  readonly headline: string;
  /** The outcome explained in a few sentences. */
  readonly verdict: string;
  /** See {@link LessonOutcome}. */
  readonly outcome: LessonOutcome;
  /** The job's result in storage at the end. */
  readonly finalResult: string | undefined;
  readonly tokens: { readonly a: bigint | undefined; readonly b: bigint | undefined };
  readonly history: readonly HistoryEvent[];
  readonly report: CheckReport;
}

const KEY = 'job';
const RESOURCE = 'job-result';
const QUIET_LINK = { minDelayMs: 0, maxDelayMs: 0, dropRequest: 0, dropReply: 0, duplicate: 0 };

/** Fills in the lesson's defaults (TTL 10 s, renew every 3 s, A freezes at 2 s for 12 s, token 33). */
export function lessonParameters(options: LessonOptions = {}): LessonParameters {
  return {
    ttlMs: options.ttlMs ?? 10_000,
    renewEveryMs: options.renewEveryMs ?? 3_000,
    freezeAtMs: options.freezeAtMs ?? 2_000,
    pauseMs: options.pauseMs ?? 12_000,
    fencing: options.fencing ?? true,
    fault: options.fault ?? 'pause',
    firstToken: (options.firstToken ?? 33n).toString(),
    bWorkMs: options.bWorkMs ?? 1_000,
    claim: options.claim ?? false,
  };
}

/**
 * The lesson's story ("Leases and fencing tokens"), on the simulation with the real client:
 * A takes the lease and renews it every `renewEveryMs`; at `freezeAtMs` A has checked its
 * lease and is about to write when the fault hits it for `pauseMs` (by default it stalls);
 * B waits for the lease, takes it when A's expires at the store, and writes; A's write then
 * arrives with its old token. Without fencing storage accepts A's late write over B's; with
 * fencing it rejects it. Deterministic: the same options always tell the same story, in Node
 * and in a browser (the lesson page runs this module).
 *
 * @example
 * const r = await runLessonStory({ pauseMs: 12_000, fencing: false });
 * r.outcome; // 'overwritten'
 */
export async function runLessonStory(options: LessonOptions = {}): Promise<LessonResult> {
  const parameters = lessonParameters(options);
  const { ttlMs, renewEveryMs, freezeAtMs, pauseMs, fencing, fault, bWorkMs, claim } = parameters;
  const firstToken = BigInt(parameters.firstToken);
  const bStartsAtMs = options.bStartsAtMs ?? 1_000;
  const world = new SimWorld({
    seed: 1,
    fencing,
    link: QUIET_LINK,
    priorTokens: { key: KEY, lastToken: firstToken - 1n },
  });
  world.meta({ source: 'leasehold-demo', scenario: 'lesson', ttlMs });
  const a = world.addWorker('A');
  const b = world.addWorker('B');
  const timeline: TimelineEntry[] = [];
  const say = (
    actor: TimelineEntry['actor'],
    kind: TimelineKind,
    text: string,
    extra: { token?: bigint; stale?: boolean } = {},
  ): void => {
    timeline.push({
      t: world.clock.now(),
      actor,
      text,
      kind,
      ...(extra.token === undefined ? {} : { token: extra.token.toString() }),
      ...(extra.stale === true ? { stale: true } : {}),
    });
  };
  const tokens: { a: bigint | undefined; b: bigint | undefined } = { a: undefined, b: undefined };
  const results: { a?: string; b?: string } = {};
  const horizon = freezeAtMs + pauseMs + 3 * ttlMs + bStartsAtMs + bWorkMs;
  let aSkipped = false;
  // A's write was accepted while B held the lease and had not written yet.
  let aStaleAccepted = false;
  // A's write was refused before B's first write: only a claim can have done that.
  let aRefusedBeforeB = false;

  // Claim before start: the new owner installs its token at storage before it works.
  const claimAt = async (
    worker: typeof a,
    actor: 'Worker A' | 'Worker B',
    token: bigint,
  ): Promise<boolean> => {
    if (!claim) return true;
    const r = await world.claim(worker, RESOURCE, token);
    say(
      actor,
      'claim',
      r === 'applied'
        ? fencing
          ? `Claims token ${token} at storage before starting: older tokens are refused from now on`
          : `Claims token ${token} at storage, which does not check tokens: nothing changes`
        : `Claims token ${token} at storage and is refused: a newer holder was there first`,
      { token },
    );
    return r === 'applied';
  };

  const storyA = async (): Promise<void> => {
    const got = await world.acquire(a, KEY, { ttlMs, waitMs: 0, renewEveryMs });
    if (typeof got === 'string') {
      say('Worker A', 'other', `could not take the lease (${got})`);
      return;
    }
    tokens.a = got.token;
    say('Worker A', 'grant', `Takes the lease with fencing token ${got.token}`, {
      token: got.token,
    });
    if (!(await claimAt(a, 'Worker A', got.token))) {
      await world.release(a, got);
      return;
    }
    await a.proc.sleep(freezeAtMs);
    if (!got.isValid()) {
      aSkipped = true;
      say('Worker A', 'skip', 'Sees its lease is gone and does not write');
      return;
    }
    let write: Promise<'applied' | 'duplicate' | 'stale_fence'>;
    if (fault === 'pause') {
      say('Worker A', 'fault', `Stalls (GC pause) for ${seconds(pauseMs)}`);
      world.fault('pause', 'A', `${pauseMs}ms`);
      await a.proc.freeze(pauseMs);
      say(
        'Worker A',
        'resume',
        got.status === 'held' && got.isValid()
          ? 'Resumes, still holds the lease, and writes'
          : 'Resumes, still believes it holds the lease, and writes',
      );
      write = world.write(a, RESOURCE, got.token, ["A's result"]);
    } else if (fault === 'delayed_request') {
      // Everything A sends sits in the network (a congested link): its write and its renewals.
      world.fault('delay', 'A', `${pauseMs}ms`);
      world.network.holdRequests('A', 'resource', freezeAtMs + pauseMs);
      world.network.holdRequests('A', 'store', freezeAtMs + pauseMs);
      say(
        'Worker A',
        'fault',
        `Sends its write with token ${got.token}; the network holds A's requests for ${seconds(pauseMs)}`,
        { token: got.token },
      );
      write = world.write(a, RESOURCE, got.token, ["A's result"]);
    } else {
      // Renewals reach the lock and extend the lease there; only their answers are lost.
      world.fault('drop_replies', 'A', `${pauseMs}ms`);
      world.network.setProfile('A', 'store', { ...QUIET_LINK, dropReply: 1 });
      say(
        'Worker A',
        'fault',
        `Keeps working; the answers to its renewals are lost for ${seconds(pauseMs)}`,
      );
      await a.proc.sleep(pauseMs);
      world.network.setProfile('A', 'store', QUIET_LINK);
      if (!got.isValid()) {
        aSkipped = true;
        say('Worker A', 'skip', 'Could not confirm a renewal in time, so stops and does not write');
        return;
      }
      say('Worker A', 'write', "Checks its lease and writes the job's result");
      write = world.write(a, RESOURCE, got.token, ["A's result"]);
    }
    const r = await write;
    results.a = r;
    if (r === 'stale_fence' && results.b === undefined) aRefusedBeforeB = true;
    if (r === 'applied' && results.b === 'applied')
      say(
        'Storage',
        'overwrite',
        `Accepts A's write (token ${got.token}) and overwrites B's result`,
        {
          token: got.token,
          stale: true,
        },
      );
    else if (r === 'applied' && tokens.b !== undefined && results.b === undefined) {
      aStaleAccepted = true;
      say(
        'Storage',
        'accept',
        fencing
          ? `Accepts A's write (token ${got.token}): B holds the lease with token ${tokens.b} but has not written, so storage has not seen token ${tokens.b}`
          : `Accepts A's write (token ${got.token}), though B holds the lease with token ${tokens.b}`,
        { token: got.token, stale: true },
      );
    } else if (r === 'applied')
      say('Storage', 'accept', `Accepts A's write (token ${got.token})`, { token: got.token });
    else
      say(
        'Storage',
        'reject',
        `Rejects A's write: token ${got.token} is older than the ${tokens.b ?? 'newest'} it has seen`,
        { token: got.token, stale: true },
      );
    await world.release(a, got);
  };

  const storyB = async (): Promise<void> => {
    await b.proc.sleep(bStartsAtMs);
    const got = await world.acquire(b, KEY, { ttlMs, waitMs: horizon, renewEveryMs });
    if (typeof got === 'string') {
      say('Worker B', 'other', `could not take the lease (${got})`);
      return;
    }
    tokens.b = got.token;
    say('Worker B', 'grant', `Takes the lease with fencing token ${got.token}`, {
      token: got.token,
    });
    if (!(await claimAt(b, 'Worker B', got.token))) {
      await world.release(b, got);
      return;
    }
    await b.proc.sleep(bWorkMs);
    say('Worker B', 'write', "Writes the job's result");
    const r = await world.write(b, RESOURCE, got.token, ["B's result"]);
    results.b = r;
    if (r === 'applied')
      say(
        'Storage',
        'accept',
        results.a === 'applied'
          ? `Accepts B's write (token ${got.token}) over A's`
          : `Accepts B's write (token ${got.token})`,
        { token: got.token },
      );
    else say('Storage', 'reject', `Rejects B's write (token ${got.token})`, { token: got.token });
    await world.release(b, got);
  };

  void storyA();
  void storyB();
  await world.advance(horizon);
  const { history, report } = world.finish();

  // The store's view: when A's lease ran out there (nothing of A's process is involved).
  const grantA = history.find(
    (e) => e.type === 'store' && e.action === 'grant' && e.token === tokens.a?.toString(),
  );
  if (grantA !== undefined && grantA.type === 'store') {
    let expiresAt = grantA.expiresAt ?? 0;
    let released = false;
    for (const e of history) {
      if (e.type !== 'store' || e.lease !== grantA.lease) continue;
      if (e.action === 'renewed' && e.expiresAt !== undefined) expiresAt = e.expiresAt;
      if (e.action === 'released' && e.at < expiresAt) released = true;
    }
    if (!released)
      timeline.push({ t: expiresAt, actor: 'Lock', text: "A's lease expires", kind: 'expire' });
  }
  // Stable: entries at the same instant keep the order in which they happened.
  timeline.sort((x, y) => x.t - y.t);

  const final = history.find((e) => e.type === 'final' && e.resource === RESOURCE);
  const finalValues = final !== undefined && final.type === 'final' ? final.values : [];
  const finalResult = finalValues[0];
  const { outcome, headline, verdict } = lessonVerdict({
    fault,
    fencing,
    tokens,
    results,
    finalResult,
    aStaleAccepted,
    aRefusedBeforeB,
    aSkipped,
  });
  return {
    parameters,
    timeline,
    headline,
    verdict,
    outcome,
    finalResult,
    tokens,
    history,
    report,
  };
}
