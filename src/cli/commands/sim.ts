import type { Command } from 'commander';
import { writeFileSync } from 'node:fs';
import { formatReport } from '../../check/checker.js';
import { PLANTED_BUGS, type PlantedBug } from '../../sim/planted-bugs.js';
import { runRandomSeed } from '../../sim/random-workload.js';
import { formatClaimSweep, sweepClaimSeeds } from '../../sim/claim-workload.js';
import { formatGroupSweep, groupReplayCommand, sweepGroupSeeds } from '../../sim/group-sweep.js';
import { GROUP_WORKLOADS, type GroupWorkload } from '../../sim/group-workloads.js';
import { GROUP_BUGS, type GroupBug } from '../../sim/planted-bugs.js';
import { formatFailoverFigures, formatSweep, replayCommand, sweepSeeds } from '../../sim/sweep.js';
import { isLeaseholdError } from '../../core/errors.js';
import { UsageError } from '../common.js';
import { EXIT } from '../exit-codes.js';
import { processIo, type CommandIo } from './io.js';

/** Options of `leasehold sim run`. */
export interface SimRunOptions {
  readonly seed: number;
  readonly fencing: boolean;
  readonly bug?: PlantedBug;
  /** The store fails over during the run (and detects it unless the bug is `miss_failover`). */
  readonly failover?: boolean;
  /** Write the history (JSON lines) here. */
  readonly historyPath?: string;
}

/** Runs one seed of the random workload and prints its verdict. Exit 0 valid, 1 violations. */
export async function runSimSeed(o: SimRunOptions, io: CommandIo = processIo): Promise<number> {
  const run = await runRandomSeed({
    seed: o.seed,
    fencing: o.fencing,
    ...(o.bug ? { bug: o.bug } : {}),
    ...(o.failover === true ? { failover: true } : {}),
  });
  if (o.historyPath !== undefined) writeFileSync(o.historyPath, run.text);
  io.out(
    `seed ${o.seed} (${o.fencing ? 'fenced' : 'unfenced control arm'}${o.bug ? `, planted bug ${o.bug}` : ''}); faults: ${run.faults.join(', ') || 'none'}`,
  );
  if (run.faults.includes('failover'))
    io.out(`reissued tokens ${run.reissuedTokens}, epoch raises ${run.epochRaises}`);
  io.out(formatReport(run.report));
  return run.report.valid ? 0 : 1;
}

/** Options of `leasehold sim sweep`. */
export interface SimSweepOptions {
  readonly from: number;
  readonly count: number;
  readonly fencing: boolean;
  readonly bug?: PlantedBug;
  readonly timeLimitMs?: number;
  /**
   * The unfenced control arm, expected to show the anomaly: exit 0 only if some runs accepted
   * a stale write or lost an acknowledged one (proving the workload can see it). With
   * `failover`: the store does not detect the failovers, and exit 0 only if some runs were
   * given a token again and the checker reported them.
   */
  readonly control?: boolean;
  /** Every seed fails over (`--workload failover`). */
  readonly failover?: boolean;
}

/**
 * Runs many seeds and prints the figures and every failing seed with its replay command.
 * Exit 0 when no seed broke a safety invariant, 1 otherwise.
 */
export async function runSimSweep(o: SimSweepOptions, io: CommandIo = processIo): Promise<number> {
  const r = await sweepSeeds({
    from: o.from,
    count: o.count,
    fencing: o.fencing,
    ...(o.bug ? { bug: o.bug } : {}),
    ...(o.failover === true ? { failover: true } : {}),
    ...(o.timeLimitMs === undefined ? {} : { timeLimitMs: o.timeLimitMs }),
    progressEvery: 5000,
    onProgress: (n) => io.err(`  … ${n} seeds`),
  });
  io.out(
    formatSweep(
      `sim ${o.fencing ? 'fenced' : 'unfenced'} seeds ${o.from}..${o.from + r.runs - 1}`,
      r,
    ),
  );
  if (o.failover === true) io.out(`failover: ${formatFailoverFigures(r)}`);
  if (r.runs < o.count) io.out(`stopped by the time limit after ${r.runs} of ${o.count} seeds`);
  if (o.failover === true && o.control === true) {
    io.out(
      `control arm (failover not detected): tokens granted again in ${r.reissuingRuns}/${r.runs} runs, checker failures in ${r.failures.length}`,
    );
    return r.reissuingRuns > 0 && r.failures.length > 0 ? 0 : 1;
  }
  for (const f of o.control === true ? [] : r.failures.slice(0, 20)) {
    const broken = Object.entries(f.report.invariants)
      .filter(([, v]) => v.status === 'violated')
      .map(([k]) => k)
      .join(',');
    io.out(
      `FAIL seed ${f.seed} (${broken}; faults ${f.faults.join(',') || 'none'}) — replay: ${replayCommand(f.seed, o)}`,
    );
  }
  // Neither a pass nor a failure: named, so each can be replayed and decided.
  for (const u of r.i5Unknown.slice(0, 20))
    io.out(`I5 UNKNOWN seed ${u.seed} (${u.note}) — replay: ${replayCommand(u.seed, o)}`);
  if (o.control === true) {
    io.out(
      `control arm: anomaly (stale write accepted or acknowledged write lost) in ${r.anomalousRuns}/${r.runs} runs`,
    );
    return r.anomalousRuns > 0 ? 0 : 1;
  }
  return r.failures.length === 0 ? 0 : 1;
}

/**
 * `sim sweep --workload claims`: the claim workload, new owners claiming before they start
 * (`--control`: they do not). Exit 0 when no seed accepted a stale write, first writes
 * included (control: when some did), 1 otherwise.
 */
export async function runClaimSweep(
  o: { from: number; count: number; control: boolean; timeLimitMs?: number },
  io: CommandIo = processIo,
): Promise<number> {
  const r = await sweepClaimSeeds({
    from: o.from,
    count: o.count,
    claims: !o.control,
    ...(o.timeLimitMs === undefined ? {} : { timeLimitMs: o.timeLimitMs }),
  });
  io.out(formatClaimSweep(`sim claims seeds ${o.from}..${o.from + r.runs - 1}`, r));
  if (r.runs < o.count) io.out(`stopped by the time limit after ${r.runs} of ${o.count} seeds`);
  if (o.control) {
    io.out(
      `control arm (no claims): a stale first write accepted in ${r.anomalousRuns}/${r.runs} runs`,
    );
    // The history checker must see them too, from the histories alone.
    return r.anomalousRuns > 0 && r.checkerStaleFirstWrites > 0 ? 0 : 1;
  }
  for (const seed of r.failingSeeds.slice(0, 20)) io.out(`FAIL seed ${seed}`);
  return r.failingSeeds.length === 0 ? 0 : 1;
}

/**
 * `sim sweep --workload semaphore|sets|lock-delay`: a workload beyond one key. Exit 0 when no
 * seed broke a safety invariant (with `--bug`, the seeds that catch it are failures too).
 */
export async function runGroupSweep(
  o: { workload: GroupWorkload; from: number; count: number; bug?: GroupBug; timeLimitMs?: number },
  io: CommandIo = processIo,
): Promise<number> {
  const r = await sweepGroupSeeds({
    ...o,
    onProgress: (n) => io.err(`  … ${n} seeds`),
  });
  const label = `sim ${o.workload}${o.bug ? ` (planted bug ${o.bug})` : ''} seeds ${o.from}..${o.from + r.runs - 1}`;
  io.out(formatGroupSweep(label, r));
  if (r.runs < o.count) io.out(`stopped by the time limit after ${r.runs} of ${o.count} seeds`);
  for (const f of r.failures.slice(0, 20))
    io.out(
      `FAIL seed ${f.seed} (${f.invariants.join(',')}) — replay: ${groupReplayCommand(o.workload, f.seed, o.bug)}`,
    );
  if (o.bug) io.out(`planted bug ${o.bug}: caught in ${r.failures.length}/${r.runs} seeds`);
  return r.failures.length === 0 ? 0 : 1;
}

function parseBug(value: string | undefined): PlantedBug | undefined {
  if (value === undefined) return undefined;
  if (!(PLANTED_BUGS as readonly string[]).includes(value))
    throw new UsageError(`--bug must be one of ${PLANTED_BUGS.join(', ')}, got ${value}`);
  return value as PlantedBug;
}

function parseGroupBug(value: string | undefined): GroupBug | undefined {
  if (value === undefined) return undefined;
  if (!(GROUP_BUGS as readonly string[]).includes(value))
    throw new UsageError(`--bug must be one of ${GROUP_BUGS.join(', ')}, got ${value}`);
  return value as GroupBug;
}

function parseCount(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff)
    throw new UsageError(`${name} must be an integer from 0 to 2^32-1, got ${value}`);
  return n;
}

/**
 * Registers `leasehold sim run --seed N` (one seed, replayed exactly) and `leasehold sim sweep
 * --seeds N` (many seeds, figures, failing seeds with replay commands).
 */
export function registerSimCommand(program: Command, io: CommandIo = processIo): void {
  const sim = program
    .command('sim')
    .description('deterministic simulation of the real client against the memory store');
  const guard = async (fn: () => Promise<number>): Promise<void> => {
    try {
      process.exitCode = await fn();
    } catch (err) {
      io.err(`leasehold sim: ${err instanceof Error ? err.message : String(err)}`);
      process.exitCode =
        err instanceof UsageError || isLeaseholdError(err, 'ERR_INVALID_ARGUMENT')
          ? EXIT.usage
          : EXIT.error;
    }
  };
  sim
    .command('run')
    .description('run one seed and print its history verdict')
    .requiredOption('--seed <n>', 'the seed')
    .option('--no-fencing', 'the unfenced control arm')
    .option('--bug <name>', `plant a store bug (${PLANTED_BUGS.join(', ')})`)
    .option('--history <file>', 'write the history (JSON lines) to a file')
    .option('--failover', 'the store fails over during the run (the failover workload)')
    .action(
      (opts: {
        seed: string;
        fencing: boolean;
        bug?: string;
        history?: string;
        failover?: boolean;
      }) =>
        guard(() => {
          const bug = parseBug(opts.bug);
          return runSimSeed(
            {
              seed: parseCount('--seed', opts.seed),
              fencing: opts.fencing,
              ...(bug ? { bug } : {}),
              ...(opts.failover === true ? { failover: true } : {}),
              ...(opts.history === undefined ? {} : { historyPath: opts.history }),
            },
            io,
          );
        }),
    );
  sim
    .command('sweep')
    .description('run many seeds and print figures and failing seeds')
    .option('--seeds <n>', 'how many seeds', '1000')
    .option('--from <n>', 'first seed', '1')
    .option('--no-fencing', 'the unfenced control arm')
    .option(
      '--bug <name>',
      `plant a bug (${PLANTED_BUGS.join(', ')}; with a workload beyond one key: ${GROUP_BUGS.join(', ')})`,
    )
    .option('--time-limit <minutes>', 'stop after this many minutes')
    .option('--control', 'unfenced control arm that must show the anomaly (exit 0 if it does)')
    .option(
      '--workload <name>',
      "'lockset' (default); 'claims': new owners claim before they start (with --control: they do not); 'failover': the store fails over and raises its epoch (with --control: it does not notice); 'semaphore', 'sets', 'lock-delay': slots of a semaphore, overlapping sets of keys, a key's lock-delay",
      'lockset',
    )
    .action(
      (opts: {
        seeds: string;
        from: string;
        fencing: boolean;
        bug?: string;
        timeLimit?: string;
        control?: boolean;
        workload: string;
      }) =>
        guard(() => {
          const timeLimit =
            opts.timeLimit === undefined
              ? {}
              : { timeLimitMs: parseCount('--time-limit', opts.timeLimit) * 60_000 };
          if ((GROUP_WORKLOADS as readonly string[]).includes(opts.workload)) {
            const groupBug = parseGroupBug(opts.bug);
            return runGroupSweep(
              {
                workload: opts.workload as GroupWorkload,
                from: parseCount('--from', opts.from),
                count: parseCount('--seeds', opts.seeds),
                ...(groupBug ? { bug: groupBug } : {}),
                ...timeLimit,
              },
              io,
            );
          }
          const bug = parseBug(opts.bug);
          if (!['lockset', 'claims', 'failover'].includes(opts.workload))
            throw new UsageError(
              `--workload must be one of lockset, claims, failover, ${GROUP_WORKLOADS.join(', ')}, got ${opts.workload}`,
            );
          const failover = opts.workload === 'failover';
          if (opts.workload === 'claims')
            return runClaimSweep(
              {
                from: parseCount('--from', opts.from),
                count: parseCount('--seeds', opts.seeds),
                control: opts.control === true,
                ...timeLimit,
              },
              io,
            );
          return runSimSweep(
            {
              from: parseCount('--from', opts.from),
              count: parseCount('--seeds', opts.seeds),
              fencing: opts.control === true && !failover ? false : opts.fencing,
              control: opts.control === true,
              ...(failover ? { failover } : {}),
              ...(failover && opts.control === true
                ? { bug: 'miss_failover' as const }
                : bug
                  ? { bug }
                  : {}),
              ...timeLimit,
            },
            io,
          );
        }),
    );
}
