import type { CheckReport } from './checker.js';
import type { HistoryEvent } from './history.js';
import { SimWorld } from './world.js';

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
}

/** One line of the story, in virtual time. */
export interface TimelineEntry {
  readonly t: number;
  readonly actor: 'Worker A' | 'Worker B' | 'Lock' | 'Storage';
  readonly text: string;
}

/** The story's outcome. */
export interface LessonResult {
  readonly timeline: readonly TimelineEntry[];
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

/**
 * The lesson's story ("Leases and fencing tokens"), on the simulation with the real client:
 * A takes the lease and renews it every `renewEveryMs`; at `freezeAtMs` A has checked its
 * lease and is about to write when it stalls for `pauseMs`; B waits for the lease, takes it
 * when A's expires at the store, and writes; A resumes and writes with its old token.
 * Without fencing storage accepts A's late write over B's; with fencing it rejects it.
 */
export async function runLessonStory(options: LessonOptions = {}): Promise<LessonResult> {
  const ttlMs = options.ttlMs ?? 10_000;
  const renewEveryMs = options.renewEveryMs ?? 3_000;
  const freezeAtMs = options.freezeAtMs ?? 2_000;
  const pauseMs = options.pauseMs ?? 12_000;
  const fencing = options.fencing ?? true;
  const firstToken = options.firstToken ?? 33n;
  const bStartsAtMs = options.bStartsAtMs ?? 1_000;
  const bWorkMs = options.bWorkMs ?? 1_000;
  const world = new SimWorld({
    seed: 1,
    fencing,
    link: { minDelayMs: 0, maxDelayMs: 0, dropRequest: 0, dropReply: 0, duplicate: 0 },
    priorTokens: { key: KEY, lastToken: firstToken - 1n },
  });
  world.meta({ source: 'leasehold-demo', scenario: 'lesson', ttlMs });
  const a = world.addWorker('A');
  const b = world.addWorker('B');
  const timeline: TimelineEntry[] = [];
  const say = (actor: TimelineEntry['actor'], text: string): void => {
    timeline.push({ t: world.clock.now(), actor, text });
  };
  const tokens: { a: bigint | undefined; b: bigint | undefined } = { a: undefined, b: undefined };
  const results: { a?: string; b?: string } = {};
  const horizon = freezeAtMs + pauseMs + 3 * ttlMs + bStartsAtMs + bWorkMs;

  const storyA = async (): Promise<void> => {
    const got = await world.acquire(a, KEY, { ttlMs, waitMs: 0, renewEveryMs });
    if (typeof got === 'string') {
      say('Worker A', `could not take the lease (${got})`);
      return;
    }
    tokens.a = got.token;
    say('Worker A', `Takes the lease with fencing token ${got.token}`);
    await a.proc.sleep(freezeAtMs);
    if (!got.isValid()) {
      say('Worker A', 'Sees its lease is gone and does not write');
      return;
    }
    say('Worker A', `Stalls (GC pause) for ${seconds(pauseMs)}`);
    world.fault('pause', 'A', `${pauseMs}ms`);
    await a.proc.freeze(pauseMs);
    say(
      'Worker A',
      got.status === 'held' && got.isValid()
        ? 'Resumes, still holds the lease, and writes'
        : 'Resumes, still believes it holds the lease, and writes',
    );
    const r = await world.write(a, RESOURCE, got.token, ["A's result"]);
    results.a = r;
    say(
      'Storage',
      r === 'applied'
        ? results.b === 'applied'
          ? `Accepts A's write (token ${got.token}) and overwrites B's result`
          : `Accepts A's write (token ${got.token})`
        : `Rejects A's write: token ${got.token} is older than the ${tokens.b ?? 'newest'} it has seen`,
    );
    await world.release(a, got);
  };

  const storyB = async (): Promise<void> => {
    await b.proc.sleep(bStartsAtMs);
    const got = await world.acquire(b, KEY, { ttlMs, waitMs: horizon, renewEveryMs });
    if (typeof got === 'string') {
      say('Worker B', `could not take the lease (${got})`);
      return;
    }
    tokens.b = got.token;
    say('Worker B', `Takes the lease with fencing token ${got.token}`);
    await b.proc.sleep(bWorkMs);
    say('Worker B', "Writes the job's result");
    const r = await world.write(b, RESOURCE, got.token, ["B's result"]);
    results.b = r;
    say(
      'Storage',
      r === 'applied'
        ? results.a === 'applied'
          ? `Accepts B's write (token ${got.token}) over A's`
          : `Accepts B's write (token ${got.token})`
        : `Rejects B's write (token ${got.token})`,
    );
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
    if (!released) timeline.push({ t: expiresAt, actor: 'Lock', text: "A's lease expires" });
  }
  timeline.sort((x, y) => x.t - y.t);

  const final = history.find((e) => e.type === 'final' && e.resource === RESOURCE);
  const finalValues = final !== undefined && final.type === 'final' ? final.values : [];
  const finalResult = finalValues[0];
  const bothWrote = results.a === 'applied' && results.b === 'applied';
  const aLate = tokens.b !== undefined && finalResult === "A's result" && bothWrote;
  let outcome: LessonResult['outcome'];
  let verdict: string;
  if (aLate) {
    outcome = 'overwritten';
    verdict =
      "Two workers acted as the owner. A's lease expired during the pause, B took over, and storage accepted A's late write anyway. The job's result is now whatever A wrote last.";
  } else if (results.a === 'stale_fence') {
    outcome = 'rejected';
    verdict = `Two workers acted as the owner, but storage checked the fencing token: A's late write (token ${tokens.a}) was rejected after B's (token ${tokens.b}). The job's result is B's.`;
  } else {
    outcome = 'one_owner';
    verdict = `One owner at a time: A's pause ended before its lease ran out, and B took over only after A released it. The job's result is ${finalResult ?? 'unset'}.`;
  }
  return { timeline, verdict, outcome, finalResult, tokens, history, report };
}

/** Formats the story as the demo prints it. */
export function formatTimeline(result: LessonResult): string {
  const lines = result.timeline.map(
    (e, i) =>
      `${String(i + 1).padStart(3)}. ${seconds(e.t).padStart(8)}  ${e.actor.padEnd(9)} ${e.text}`,
  );
  return [...lines, '', `Verdict: ${result.verdict}`].join('\n');
}

function seconds(ms: number): string {
  const s = ms / 1000;
  return `${Number.isInteger(s) ? s : s.toFixed(3).replace(/0+$/, '')} s`;
}
