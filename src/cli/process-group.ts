import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/** How the command itself ended. */
export interface CommandExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** Set when the command could not be started (`ENOENT`, `EACCES` …). */
  readonly error?: NodeJS.ErrnoException;
}

/** Options of {@link startProcessGroup}. */
export interface ProcessGroupOptions {
  /** The command's environment. */
  readonly env: NodeJS.ProcessEnv;
  /** After the first stop signal, how long the group has before SIGKILL, in ms. */
  readonly graceMs: number;
}

/**
 * A command started as the leader of its own process group and session, together with every
 * descendant that stays in that group. Signals go to the whole group, so a shell script's
 * children and grandchildren get them too.
 *
 * Not covered: a process that leaves the group (`setsid`, `setpgid`, a double-forked daemon).
 * On Windows there are no process groups: only the command itself is signalled.
 */
export interface ProcessGroup {
  /** Resolves when the command itself (the group's leader) has exited or could not start. */
  readonly exited: Promise<CommandExit>;
  /**
   * Sends `signal` to every process of the group. The first call also arms SIGKILL to the
   * group after the grace period; later calls only send their signal.
   */
  stop(signal: NodeJS.Signals): void;
  /** True once the leader has exited and no live process of the group remains. */
  isEmpty(): boolean;
  /**
   * After the leader exited: stops whatever it left in its group (SIGTERM unless it was sent
   * already, and SIGKILL after the grace period counted from the first stop signal) and
   * resolves true once no live process of the group remains; false when some remained
   * {@link KILL_WAIT_MS} after SIGKILL (stuck in the kernel, or owned by a user we may not
   * signal).
   */
  settle(): Promise<boolean>;
  /** SIGKILL to the group now, unless it is known to be empty: for a process about to exit. */
  kill(): void;
}

/** How long processes of the group may outlive a SIGKILL before we stop waiting for them. */
export const KILL_WAIT_MS = 5000;

const POSIX = process.platform !== 'win32';
const POLL_MAX_MS = 100;

/**
 * Starts `file args…` with stdio inherited, as the leader of a new session and process group
 * (`setsid`), so that the group holds the command and its descendants and nothing else.
 *
 * @example
 * const group = startProcessGroup('./report.sh', [], { env: process.env, graceMs: 10_000 });
 * process.once('SIGTERM', () => group.stop('SIGTERM'));
 * const exit = await group.exited;
 * await group.settle(); // nothing of the command runs any more
 */
export function startProcessGroup(
  file: string,
  args: readonly string[],
  options: ProcessGroupOptions,
): ProcessGroup {
  const child = spawn(file, args, { stdio: 'inherit', env: options.env, detached: POSIX });
  // The leader's pid is the group's id for as long as the group has a member: the kernel does
  // not hand the number out again before then.
  const pgid = child.pid;
  let leaderGone = pgid === undefined;
  let empty = pgid === undefined;
  let killTimer: NodeJS.Timeout | undefined;
  let killSentAt: number | undefined;
  let termSent = false;
  const probe = POSIX && pgid !== undefined ? createMemberProbe(pgid) : () => false;

  const send = (signal: NodeJS.Signals): void => {
    if (empty || pgid === undefined) return;
    if (signal === 'SIGKILL') killSentAt ??= performance.now();
    if (signal === 'SIGTERM') termSent = true;
    if (!POSIX) {
      child.kill(signal);
      return;
    }
    try {
      process.kill(-pgid, signal);
    } catch {
      // ESRCH: the group is gone. EPERM: its members are no longer ours to signal.
    }
  };
  const exited = new Promise<CommandExit>((resolve) => {
    child.once('error', (error: NodeJS.ErrnoException) => {
      leaderGone = true;
      resolve({ code: null, signal: null, error });
    });
    child.once('exit', (code, signal) => {
      leaderGone = true;
      resolve({ code, signal });
    });
  });
  const group: ProcessGroup = {
    exited,
    stop(signal) {
      send(signal);
      killTimer ??= setTimeout(() => send('SIGKILL'), options.graceMs);
    },
    isEmpty() {
      if (!empty && leaderGone && !probe()) empty = true;
      return empty;
    },
    async settle() {
      await exited;
      // Even when a stop is under way: what a shell runs in the background ignores SIGINT and
      // SIGQUIT, so a forwarded Ctrl-C leaves it running.
      if (!termSent && !group.isEmpty()) group.stop('SIGTERM');
      for (let pollMs = 10; !group.isEmpty(); pollMs = Math.min(2 * pollMs, POLL_MAX_MS)) {
        if (killSentAt !== undefined) {
          if (performance.now() - killSentAt > KILL_WAIT_MS) break;
          // A process forked while the first SIGKILL went out was not yet in the group.
          send('SIGKILL');
        }
        await sleep(pollMs);
      }
      clearTimeout(killTimer);
      return empty;
    },
    kill() {
      if (!group.isEmpty()) send('SIGKILL');
    },
  };
  return group;
}

/**
 * A check whether group `pgid` still has a live member. `kill(-pgid, 0)` answers for the
 * group's processes including zombies, which run no code but stay until their parent reaps
 * them; orphans go to init, and an init that does not reap (a container whose PID 1 is this
 * very process, say) keeps them for good. On Linux a group that `kill` still reports is read
 * from /proc, and counts as empty when only zombies remain. A /proc read costs ~45 µs per
 * process on the machine, so it runs at most 5% of the time.
 */
function createMemberProbe(pgid: number): () => boolean {
  let nextReadAt = 0;
  return () => {
    try {
      process.kill(-pgid, 0);
    } catch (err) {
      return (err as NodeJS.ErrnoException).code !== 'ESRCH';
    }
    const now = performance.now();
    if (process.platform !== 'linux' || now < nextReadAt) return true;
    const live = hasLiveMember(pgid);
    nextReadAt = now + 20 * (performance.now() - now);
    return live;
  };
}

/** True when /proc shows a process of group `pgid` that is not a zombie, or cannot be read. */
function hasLiveMember(pgid: number): boolean {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return true; // no /proc (a bare chroot): `kill` had the last word
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
    } catch {
      continue; // exited since the directory was read
    }
    // "pid (comm) state ppid pgrp …": comm may hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) === pgid && fields[0] !== 'Z' && fields[0] !== 'X') return true;
  }
  return false;
}
