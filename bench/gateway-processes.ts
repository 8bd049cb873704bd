// The fencing gateway and the plain reverse proxy each in a process of its own, as users run
// them (`leasehold gateway …` from the CLI, with its default logging and metrics); this process
// holds the clients and the upstream. Two kinds of rows:
// - closed loop, 1 and 32 clients: requests/s, latency, and each proxy's own CPU per request
//   (read from /proc/<pid>/stat, which costs the proxy nothing);
// - open loop at a fixed offered load below saturation (half the plain proxy's saturated rate at
//   32 clients, measured in this run): the latency a request pays for fencing when the machine
//   is not saturated.
// Subjects alternate in interleaved rounds; figures over the plain proxy are medians of the
// per-round differences or ratios. `BENCH_GATEWAY_PROF=DIR` writes the gateway's CPU profile.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { CLI } from '../test/support/cli.js';
import { tempDir } from '../test/support/tmp.js';
import { measureCycles, percentile, type BenchOptions, type BenchResult } from './lib.js';

const PLAIN_PEER = fileURLToPath(new URL('./plain-proxy-peer.js', import.meta.url));

interface Subject {
  readonly name: string;
  readonly url: string;
  /** The proxy's process (undefined: the upstream itself, in this process). */
  readonly pid: number | undefined;
}

interface Window {
  readonly perSec: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** The subject process's CPU per 1,000 requests (undefined for the upstream itself). */
  readonly procCpuMsPer1000: number | undefined;
}

/** CPU seconds of process `pid` so far (user + system), from /proc. */
function procCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[11] and [12] are utime and stime (fields 14 and 15 of proc(5)), in clock ticks.
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function startChild(args: string[], name: string): Promise<ChildProcess & { url: string }> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((ok, fail) => {
    let out = '';
    const timer = setTimeout(() => fail(new Error(`${name}: no listening line`)), 30_000);
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /listening on (\S+)/.exec(out);
      if (m !== null) {
        clearTimeout(timer);
        ok(m[1]!);
      }
    });
    child.once('exit', () => fail(new Error(`${name}: exited before listening`)));
  });
  return Object.assign(child, { url });
}

function signed(n: number, digits: number): string {
  return `${n >= 0 ? '+' : ''}${n.toFixed(digits)}`;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** One request of client `w` (its own scope in `run`) with `token`; throws unless 200. */
async function put(
  pool: Pool,
  subject: string,
  run: string,
  w: number,
  token: bigint,
): Promise<void> {
  const r = await pool.request({
    method: 'PUT',
    path: `/items/${run}-${w}`,
    headers: { 'fencing-token': token.toString() },
    body: 'x',
  });
  await r.body.dump();
  if (r.statusCode !== 200) throw new Error(`${subject} answered ${r.statusCode}`);
}

/** Closed loop: `workers` clients, each sending its next request when the last one answered. */
async function closedWindow(
  s: Subject,
  pool: Pool,
  workers: number,
  ms: number,
  tokens: bigint[],
  newToken: boolean,
): Promise<Window> {
  const cpu0 = s.pid === undefined ? 0 : procCpuSeconds(s.pid);
  const m = await measureCycles(workers, ms, (w) => {
    if (newToken) tokens[w]! += 1n;
    return put(pool, s.name, `${workers}-${newToken ? 'new' : 'same'}`, w, tokens[w]!);
  });
  const cpu = s.pid === undefined ? undefined : procCpuSeconds(s.pid) - cpu0;
  return {
    perSec: m.cyclesPerSec,
    p50Ms: m.p50Ms,
    p99Ms: m.p99Ms,
    procCpuMsPer1000: cpu === undefined ? undefined : (cpu * 1e6) / m.cycles,
  };
}

/**
 * Open loop: `perSec` requests a second spread evenly over `clients` scopes, each sent at its
 * time whether or not earlier ones answered (so a slow subject cannot slow the offered load
 * down). Latency runs from the send to the end of the answer.
 */
async function openWindow(
  s: Subject,
  pool: Pool,
  clients: number,
  perSec: number,
  ms: number,
): Promise<Window> {
  const latencies: number[] = [];
  const inFlight: Promise<void>[] = [];
  const cpu0 = s.pid === undefined ? 0 : procCpuSeconds(s.pid);
  const start = performance.now();
  const gap = 1000 / perSec;
  let sent = 0;
  while (performance.now() - start < ms) {
    // Timers fire at best every millisecond: send every request whose time has come.
    const due = Math.floor((performance.now() - start) / gap) + 1;
    for (; sent < due; sent++) {
      const w = sent % clients;
      const t = performance.now();
      inFlight.push(
        put(pool, s.name, 'open', w, 1n).then(() => void latencies.push(performance.now() - t)),
      );
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  await Promise.all(inFlight);
  const elapsed = performance.now() - start;
  const cpu = s.pid === undefined ? undefined : procCpuSeconds(s.pid) - cpu0;
  return {
    perSec: (latencies.length / elapsed) * 1000,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    procCpuMsPer1000: cpu === undefined ? undefined : (cpu * 1e6) / latencies.length,
  };
}

/** Runs `window` for each subject in `rounds` rounds, the order rotating each round. */
async function interleaved(
  subjects: readonly Subject[],
  rounds: number,
  window: (s: Subject, i: number) => Promise<Window>,
): Promise<Window[][]> {
  const runs: Window[][] = subjects.map(() => []);
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < subjects.length; k++) {
      const i = (k + round) % subjects.length;
      runs[i]!.push(await window(subjects[i]!, i));
    }
  }
  return runs;
}

/** The rows of one measurement: medians, and per-round figures against the plain proxy (index 0). */
function rows(
  subjects: readonly Subject[],
  runs: Window[][],
  scenario: string,
  workers: number,
  note: string,
): BenchResult[] {
  const plain = runs[0]!;
  return subjects.map((s, i) => {
    const ws = runs[i]!;
    const perRound = (f: (w: Window) => number): number =>
      median(ws.map((w, r) => f(w) - f(plain[r]!)));
    const cpu = ws.every((w) => w.procCpuMsPer1000 !== undefined)
      ? median(ws.map((w) => w.procCpuMsPer1000!))
      : undefined;
    const cpuOver =
      i === 0 || cpu === undefined
        ? ''
        : `, proxy CPU ${signed(
            perRound((w) => w.procCpuMsPer1000!),
            0,
          )} µs per request`;
    const vsPlain =
      i === 0
        ? ''
        : `; over the plain proxy, median per round: p50 ${signed(
            perRound((w) => w.p50Ms),
            3,
          )} ms, p99 ${signed(
            perRound((w) => w.p99Ms),
            3,
          )} ms${cpuOver}`;
    return {
      suite: 'gateway',
      subject: s.name,
      // Its own scenario name: the table's plain-proxy baseline for these rows is the plain
      // proxy in its own process, not the one inside the bench process.
      scenario: `${scenario}, own processes`,
      workers,
      keys: 'distinct',
      cyclesPerSec: median(ws.map((w) => w.perSec)),
      p50Ms: median(ws.map((w) => w.p50Ms)),
      p99Ms: median(ws.map((w) => w.p99Ms)),
      ...(cpu === undefined ? {} : { serverCpuMsPer1000: cpu }),
      ...(i === 0 ? {} : { ratioToRaw: median(ws.map((w, r) => w.perSec / plain[r]!.perSec)) }),
      notes: `${note}, ${ws.length} interleaved rounds (req/s ${ws.map((w) => Math.round(w.perSec)).join('/')})${vsPlain}`,
    };
  });
}

/** The gateway suite's rows with each proxy in its own process. */
export async function gatewayProcessBenchmarks(opts: BenchOptions): Promise<BenchResult[]> {
  const upstream = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const upUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const tmp = tempDir('bench-gw-split');
  const prof = process.env['BENCH_GATEWAY_PROF'];
  const children: ChildProcess[] = [];
  const results: BenchResult[] = [];
  try {
    const plain = await startChild([PLAIN_PEER, upUrl], 'plain proxy');
    children.push(plain);
    const gw = await startChild(
      [
        ...(prof === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', prof]),
        CLI,
        'gateway',
        '--upstream',
        upUrl,
        '--route',
        'PUT /items/:id=item/{id}',
        '--marks',
        `sqlite:${tmp.dir}/marks.db`,
        '--listen',
        '127.0.0.1:0',
      ],
      'gateway',
    );
    children.push(gw);
    const subjects: Subject[] = [
      { name: 'raw reply-from proxy', url: plain.url, pid: plain.pid },
      { name: 'leasehold gateway', url: gw.url, pid: gw.pid },
      { name: 'upstream directly', url: upUrl, pid: undefined },
    ];
    const rounds = opts.quick ? 1 : 5;
    const sliceMs = Math.max(300, Math.floor(opts.durationMs / rounds));
    let plainSaturated = 0;
    for (const scenario of ['same token', 'new token each'] as const) {
      for (const workers of [1, 32]) {
        const pools = subjects.map((s) => new Pool(s.url, { connections: workers }));
        const tokens = subjects.map(() => Array.from({ length: workers }, () => 1n));
        const window = (s: Subject, i: number, ms: number): Promise<Window> =>
          closedWindow(s, pools[i]!, workers, ms, tokens[i]!, scenario === 'new token each');
        for (const [i, s] of subjects.entries()) await window(s, i, 300);
        const runs = await interleaved(subjects, rounds, (s, i) => window(s, i, sliceMs));
        for (const p of pools) await p.close();
        if (scenario === 'same token' && workers === 32)
          plainSaturated = median(runs[0]!.map((w) => w.perSec));
        results.push(...rows(subjects, runs, `PUT, ${scenario}`, workers, 'closed loop'));
      }
    }
    // Half the plain proxy's saturated rate: every subject can carry it, so latency is the
    // work of one request plus what waiting the load itself causes, not a queue of 32.
    const offered = Math.max(10, Math.round(plainSaturated / 2));
    const clients = 32;
    const pools = subjects.map((s) => new Pool(s.url, { connections: clients }));
    for (const [i, s] of subjects.entries()) await openWindow(s, pools[i]!, clients, offered, 300);
    const runs = await interleaved(subjects, rounds, (s, i) =>
      openWindow(s, pools[i]!, clients, offered, sliceMs),
    );
    for (const p of pools) await p.close();
    results.push(
      ...rows(
        subjects,
        runs,
        `PUT, same token, open loop ${offered}/s`,
        clients,
        `open loop at ${offered} req/s offered (half the plain proxy's saturated rate)`,
      ),
    );
  } finally {
    for (const c of children) {
      c.kill('SIGTERM');
      if (c.exitCode === null) await new Promise((r) => c.once('exit', r));
    }
    await new Promise((r) => upstream.close(r));
    tmp.remove();
  }
  return results;
}
