import type { CheckReport } from '../check/checker.js';
import type { HistoryEvent } from '../history/events.js';
import type { LessonFault } from './lesson-presets.js';
import { SimWorld } from './world.js';

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
  /** `overwritten`: storage accepted A's late write over B's (the lesson's failure). */
  readonly outcome: 'overwritten' | 'rejected' | 'one_owner';
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
  const { ttlMs, renewEveryMs, freezeAtMs, pauseMs, fencing, fault } = parameters;
  const firstToken = BigInt(parameters.firstToken);
  const bStartsAtMs = options.bStartsAtMs ?? 1_000;
  const bWorkMs = options.bWorkMs ?? 1_000;
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
    else if (r === 'applied')
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
  const bothWrote = results.a === 'applied' && results.b === 'applied';
  const aLate = tokens.b !== undefined && finalResult === "A's result" && bothWrote;
  const during =
    fault === 'pause'
      ? 'during the pause'
      : fault === 'delayed_request'
        ? 'while its write was held in the network'
        : 'while its renewal answers were lost';
  let outcome: LessonResult['outcome'];
  let headline: string;
  let verdict: string;
  if (aLate) {
    outcome = 'overwritten';
    headline = "Storage accepted A's late write and overwrote B's result.";
    verdict = `Two workers acted as the owner. A's lease expired ${during}, B took over, and storage accepted A's late write anyway. The job's result is now whatever A wrote last.`;
  } else if (results.a === 'stale_fence') {
    outcome = 'rejected';
    headline = `Storage rejected token ${tokens.a} after ${tokens.b}.`;
    verdict = `Two workers acted as the owner, but storage checked the fencing token: A's late write (token ${tokens.a}) was rejected after B's (token ${tokens.b}). The job's result is B's.`;
  } else if (aSkipped) {
    outcome = 'one_owner';
    headline = "One owner at a time: A stopped without writing, and B's result stands.";
    verdict = `One owner at a time: A could not confirm its lease, stopped at its own deadline without writing, and B took the lease only after it ran out at the lock. The job's result is ${finalResult ?? 'unset'}.`;
  } else {
    outcome = 'one_owner';
    headline = `One owner at a time: A wrote while it held the lease, and B took over after A released it.`;
    verdict = `One owner at a time: A's ${fault === 'pause' ? 'pause' : 'trouble'} ended before its lease ran out, and B took over only after A released it. The job's result is ${finalResult ?? 'unset'}.`;
  }
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

/**
 * The story as plain JSON (tokens as decimal strings): what `leasehold demo --json` prints and
 * what the lesson page draws, so the two can be compared field by field.
 */
export interface LessonSummary {
  readonly parameters: LessonParameters;
  readonly timeline: readonly TimelineEntry[];
  readonly headline: string;
  readonly verdict: string;
  readonly outcome: LessonResult['outcome'];
  readonly finalResult: string | null;
  readonly tokens: { readonly a: string | null; readonly b: string | null };
}

/** Reduces a {@link LessonResult} to its {@link LessonSummary} (no history, no report). */
export function summarizeLesson(result: LessonResult): LessonSummary {
  return {
    parameters: result.parameters,
    timeline: result.timeline,
    headline: result.headline,
    verdict: result.verdict,
    outcome: result.outcome,
    finalResult: result.finalResult ?? null,
    tokens: { a: result.tokens.a?.toString() ?? null, b: result.tokens.b?.toString() ?? null },
  };
}

/** Formats the story as the demo prints it. */
export function formatTimeline(result: LessonResult): string {
  const lines = result.timeline.map(
    (e, i) =>
      `${String(i + 1).padStart(3)}. ${seconds(e.t).padStart(8)}  ${e.actor.padEnd(9)} ${e.text}`,
  );
  return [...lines, '', `Verdict: ${result.verdict}`].join('\n');
}

/** Milliseconds as the lesson writes them: `12 s`, `2.5 s`. */
export function seconds(ms: number): string {
  const s = ms / 1000;
  return `${Number.isInteger(s) ? s : s.toFixed(3).replace(/0+$/, '')} s`;
}
