import { spawn, type ChildProcess } from 'node:child_process';

/** A running `etcdctl` (API v3): its process, everything it printed so far, and its exit. */
export interface Ctl {
  readonly proc: ChildProcess;
  out: string;
  exited: Promise<number | null>;
}

/** Starts `etcdctl ARGS` against `endpoints`, collecting stdout and stderr in `out`. */
export function etcdctl(endpoints: string[], args: string[]): Ctl {
  const proc = spawn('etcdctl', ['--endpoints', endpoints.join(','), ...args], {
    env: { ...process.env, ETCDCTL_API: '3' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const ctl: Ctl = {
    proc,
    out: '',
    exited: new Promise((resolve) => proc.on('exit', (code) => resolve(code))),
  };
  proc.stdout.on('data', (d: Buffer) => (ctl.out += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (ctl.out += d.toString()));
  return ctl;
}
