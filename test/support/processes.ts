import { readFileSync } from 'node:fs';

/**
 * True while process `pid` exists and has not exited, from /proc (Linux). A zombie (exited,
 * not yet reaped by its parent or by init) counts as gone: it runs no code, although
 * `kill(pid, 0)` still succeeds on it until it is reaped.
 */
export function isLive(pid: number): boolean {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return false;
  }
  // The command name in parentheses may itself hold spaces or parentheses: the state follows
  // the last ')'.
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state !== 'Z' && state !== 'X';
}
