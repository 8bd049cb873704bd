import type { Command } from 'commander';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseDuration } from '../../core/duration.js';
import { isLeaseholdError } from '../../core/errors.js';
import {
  formatTimeline,
  LESSON_FAULTS,
  runLessonStory,
  summarizeLesson,
  type LessonFault,
  type LessonOptions,
} from '../../sim/lesson.js';
import type { RealStep } from '../../fault/stories.js';
import { cliDuration } from '../common.js';
import { EXIT } from '../exit-codes.js';
import { FEATURE_PACKAGES, requirePackages } from '../optional-packages.js';
import { processIo, type CommandIo } from './io.js';

/** Options of `leasehold demo`, durations in ms. */
export interface DemoOptions {
  readonly ttlMs: number;
  readonly renewEveryMs: number;
  readonly pauseMs: number;
  readonly freezeAtMs: number;
  readonly fencing: boolean;
  readonly firstToken: bigint;
  /** Run real processes on the embedded SQLite store instead of the simulation. */
  readonly real: boolean;
  /** What happens to A (simulation only): a pause, a delayed request or lost renewal answers. */
  readonly fault: LessonFault;
  /** Print the story as one JSON document (the lesson page draws the same document). */
  readonly json: boolean;
  /** How long B works after taking the lease before its first write (simulation only). */
  readonly bWorkMs: number;
  /** Each worker claims its token at storage as it takes the lease (simulation only). */
  readonly claim: boolean;
}

/** The lesson's numbers: TTL 10 s, renew every 3 s, A freezes at 2 s for 12 s, token 33. */
export const DEMO_DEFAULTS: DemoOptions = Object.freeze({
  ttlMs: 10_000,
  renewEveryMs: 3_000,
  pauseMs: 12_000,
  freezeAtMs: 2_000,
  fencing: true,
  firstToken: 33n,
  real: false,
  fault: 'pause',
  json: false,
  bWorkMs: 1_000,
  claim: false,
});

/**
 * Tells the lesson's story — a lease that runs out while its holder is frozen — and prints the
 * timeline (who took which token when, who wrote, what storage did) and a one-line verdict.
 * On the simulation by default (virtual time: instant, deterministic); with `real`, as real
 * processes on the embedded SQLite store, frozen with SIGSTOP (takes real time). Returns the
 * exit code: 0 (the story ran; the verdict says what happened), 64 for bad options.
 */
export async function runDemo(
  options: Partial<DemoOptions> = {},
  io: CommandIo = processIo,
): Promise<number> {
  const o: DemoOptions = { ...DEMO_DEFAULTS, ...options };
  // The TTL's own bound first: with --ttl 5 alone, "--renew-every (3000ms) must be shorter
  // than --ttl (5ms)" would blame the option the user did not give.
  if (o.ttlMs < 100) {
    io.err(`leasehold demo: --ttl must be at least 100ms, got ${o.ttlMs}ms`);
    return EXIT.usage;
  }
  if (o.renewEveryMs >= o.ttlMs) {
    io.err(
      `leasehold demo: --renew-every (${o.renewEveryMs}ms) must be shorter than --ttl (${o.ttlMs}ms)`,
    );
    return EXIT.usage;
  }
  if (o.real && (o.json || o.fault !== 'pause' || o.claim || o.bWorkMs !== 1_000)) {
    io.err(
      'leasehold demo: --real tells only the pause story, as text (no --json, --fault, --claim or --b-work)',
    );
    return EXIT.usage;
  }
  if (o.json) {
    const r = await runLessonStory(storyOf(o));
    io.out(JSON.stringify(summarizeLesson(r), null, 2));
    return 0;
  }
  io.out(
    `A lease that runs out while its holder is asleep. TTL ${sec(o.ttlMs)}, A renews every ${sec(o.renewEveryMs)}, A freezes at ${sec(o.freezeAtMs)} for ${sec(o.pauseMs)}; storage ${o.fencing ? 'checks' : 'does not check'} fencing tokens. (${o.real ? 'real processes, embedded SQLite store, SIGSTOP/SIGCONT' : 'simulation, virtual time'})`,
  );
  io.out('');
  if (!o.real) {
    const r = await runLessonStory(storyOf(o));
    io.out(formatTimeline(r));
    return 0;
  }
  if (o.pauseMs <= o.ttlMs) {
    io.err(
      'leasehold demo --real: --pause must be longer than --ttl (otherwise A never loses its lease)',
    );
    return EXIT.usage;
  }
  // The real story runs SQLite stores in child processes; the simulated one needs nothing.
  await requirePackages('demo --real', FEATURE_PACKAGES.sqlite);
  const { runRealPauseStory } = await import('../../fault/stories.js');
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-demo-'));
  let n = 0;
  const print = (s: RealStep): void =>
    io.out(
      `${String(++n).padStart(3)}. ${sec(Math.max(0, s.t)).padStart(8)}  ${s.actor.padEnd(9)} ${s.text}`,
    );
  try {
    const r = await runRealPauseStory({
      storeUrl: `sqlite:${join(dir, 'leases.db')}`,
      resourcePath: join(dir, 'resource.db'),
      ttlMs: o.ttlMs,
      renewEveryMs: o.renewEveryMs,
      pauseMs: o.pauseMs,
      freezeAtMs: o.freezeAtMs,
      fencing: o.fencing,
      key: 'job',
      replyTimeoutMs: o.pauseMs + 4 * o.ttlMs + 30_000,
      onStep: print,
    });
    io.out('');
    io.out(
      r.aWrite === 'applied'
        ? `Verdict: Two workers acted as the owner. A's lease expired while it was stopped, B took over (token ${r.bToken}), and storage accepted A's late write (token ${r.aToken}) anyway. The job's result is now whatever A wrote last.`
        : r.aWrite === 'stale_fence'
          ? `Verdict: Two workers acted as the owner, but storage checked the fencing token: A's late write (token ${r.aToken}) was rejected after B's (token ${r.bToken}). The job's result is B's.`
          : `Verdict: A did not write (${r.aWrite}).`,
    );
    return 0;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Registers `leasehold demo` on a commander program.
 *
 * @example
 * // $ leasehold demo --pause 12s --ttl 10s --renew-every 3s --no-fencing
 * registerDemoCommand(program);
 */
export function registerDemoCommand(program: Command, io: CommandIo = processIo): void {
  program
    .command('demo')
    .description(
      "the lesson's story: a lease runs out while its holder is frozen; with and without fencing",
    )
    .option('--pause <duration>', 'how long worker A is frozen', '12s')
    .option('--ttl <duration>', 'lease TTL', '10s')
    .option('--renew-every <duration>', "A's renewal cadence", '3s')
    .option(
      '--freeze-at <duration>',
      'when A freezes (after checking its lease, before writing)',
      '2s',
    )
    .option('--first-token <n>', "A's fencing token (the lesson's is 33)", '33')
    .option('--no-fencing', 'storage does not check fencing tokens')
    .option('--b-work <duration>', 'how long B works before its first write', '1s')
    .option(
      '--claim',
      'each worker claims its token at storage as it takes the lease, before it starts',
    )
    .option(
      '--fault <kind>',
      `what happens to A: ${LESSON_FAULTS.join(', ')} (simulation only)`,
      'pause',
    )
    .option(
      '--json',
      'print the story as JSON (timeline, verdict, tokens), as the lesson page draws it',
    )
    .option('--real', 'run real processes on the embedded SQLite store (SIGSTOP/SIGCONT)')
    .action(async (opts: Record<string, string | boolean>) => {
      let parsed: Partial<DemoOptions>;
      try {
        const first = String(opts.firstToken);
        if (!/^[1-9][0-9]{0,17}$/.test(first))
          throw new Error(`--first-token must be a positive integer, got ${first}`);
        const fault = String(opts.fault);
        if (!(LESSON_FAULTS as readonly string[]).includes(fault))
          throw new Error(`--fault must be one of ${LESSON_FAULTS.join(', ')}, got ${fault}`);
        parsed = {
          fault: fault as LessonFault,
          json: opts.json === true,
          pauseMs: parseDuration('--pause', cliDuration(String(opts.pause))),
          ttlMs: parseDuration('--ttl', cliDuration(String(opts.ttl))),
          renewEveryMs: parseDuration('--renew-every', cliDuration(String(opts.renewEvery))),
          freezeAtMs: parseDuration('--freeze-at', cliDuration(String(opts.freezeAt))),
          firstToken: BigInt(first),
          fencing: opts.fencing !== false,
          real: opts.real === true,
          bWorkMs: parseDuration('--b-work', cliDuration(String(opts.bWork))),
          claim: opts.claim === true,
        };
      } catch (err) {
        io.err(
          `leasehold demo: ${isLeaseholdError(err) || err instanceof Error ? err.message : String(err)}`,
        );
        process.exitCode = EXIT.usage;
        return;
      }
      process.exitCode = await runDemo(parsed, io);
    });
}

/** The simulated story's options: the demo's own, less the ones about how to show it. */
function storyOf(o: DemoOptions): LessonOptions {
  const { real: _real, json: _json, ...story } = o;
  return story;
}

function sec(ms: number): string {
  const s = ms / 1000;
  return `${Number.isInteger(s) ? s : s.toFixed(3).replace(/0+$/, '')} s`;
}
