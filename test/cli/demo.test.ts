import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Command } from 'commander';
import { registerDemoCommand, runDemo } from '../../src/cli/commands/demo.js';
import type { CommandIo } from '../../src/cli/commands/io.js';

function capture(): CommandIo & { text: () => string; errors: () => string } {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
    text: () => out.join('\n'),
    errors: () => err.join('\n'),
  };
}

async function runCli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const io = capture();
  const program = new Command('leasehold').exitOverride();
  registerDemoCommand(program, io);
  const before = process.exitCode;
  try {
    await program.parseAsync(['node', 'leasehold', ...args]);
    return { code: Number(process.exitCode ?? 0), out: io.text(), err: io.errors() };
  } finally {
    process.exitCode = before;
  }
}

describe('leasehold demo', () => {
  it("prints the lesson's outcome without fencing: tokens 33 and 34, A's late write overwrites B's", async () => {
    const r = await runCli([
      'demo',
      '--pause',
      '12s',
      '--ttl',
      '10s',
      '--renew-every',
      '3s',
      '--no-fencing',
    ]);
    assert.equal(r.code, 0, r.err);
    const lines = r.out.split('\n');
    const at = (re: RegExp): number => lines.findIndex((l) => re.test(l));
    const order = [
      /0 s {2}Worker A {2}Takes the lease with fencing token 33$/,
      /2 s {2}Worker A {2}Stalls \(GC pause\) for 12 s$/,
      /10 s {2}Lock {6}A's lease expires$/,
      /Worker B {2}Takes the lease with fencing token 34$/,
      /Worker B {2}Writes the job's result$/,
      /Storage {3}Accepts B's write \(token 34\)$/,
      /14 s {2}Worker A {2}Resumes, still believes it holds the lease, and writes$/,
      /14 s {2}Storage {3}Accepts A's write \(token 33\) and overwrites B's result$/,
    ].map(at);
    assert.ok(
      order.every((i) => i >= 0),
      r.out,
    );
    assert.deepEqual(
      [...order].sort((x, y) => x - y),
      order,
      r.out,
    );
    assert.match(
      r.out,
      /Verdict: Two workers acted as the owner\. .*storage accepted A's late write anyway\. The job's result is now whatever A wrote last\./,
    );
  });

  it("prints the fenced outcome: A's write with token 33 rejected, B's result kept", async () => {
    const io = capture();
    assert.equal(await runDemo({}, io), 0);
    const text = io.text();
    assert.match(
      text,
      /14 s {2}Storage {3}Rejects A's write: token 33 is older than the 34 it has seen/,
    );
    assert.doesNotMatch(text, /Accepts A's write/);
    assert.match(
      text,
      /Verdict: .*A's late write \(token 33\) was rejected after B's \(token 34\)\. The job's result is B's\./,
    );
  });

  it('tells a different story when the pause is shorter than the lease', async () => {
    const r = await runCli(['demo', '--pause', '5s']);
    assert.match(r.out, /Verdict: One owner at a time/);
  });

  it('refuses options that cannot work, with exit code 64 (usage)', async () => {
    const r = await runCli(['demo', '--ttl', '3s', '--renew-every', '3s']);
    assert.equal(r.code, 64);
    assert.match(r.err, /--renew-every .* must be shorter than --ttl/);
    const bad = await runCli(['demo', '--pause', 'soon']);
    assert.equal(bad.code, 64);
    assert.match(bad.err, /--pause/);
  });

  it(
    '--real runs the story with real processes on the embedded SQLite store (SIGSTOP/SIGCONT)',
    { timeout: 60_000 },
    async () => {
      for (const fencing of [true, false]) {
        const r = await runCli([
          'demo',
          '--real',
          '--ttl',
          '1s',
          '--renew-every',
          '300ms',
          '--freeze-at',
          '200ms',
          '--pause',
          '1500ms',
          ...(fencing ? [] : ['--no-fencing']),
        ]);
        assert.equal(r.code, 0, r.err);
        assert.match(r.out, /Worker A {2}Takes the lease with fencing token (\d+)/);
        assert.match(r.out, /stopped \(SIGSTOP\)/);
        assert.match(
          r.out,
          fencing
            ? /Storage {3}Rejects A's write/
            : /Storage {3}Accepts A's write \(token \d+\) and overwrites B's result/,
        );
        assert.match(r.out, fencing ? /was rejected after B's/ : /storage accepted A's late write/);
      }
    },
  );

  it('--json prints the story as one JSON document: timeline, headline, tokens as strings', async () => {
    const r = await runCli(['demo', '--json', '--no-fencing', '--fault', 'delayed_request']);
    assert.equal(r.code, 0, r.err);
    const doc = JSON.parse(r.out) as {
      outcome: string;
      headline: string;
      tokens: { a: string; b: string };
      parameters: { fault: string; fencing: boolean; pauseMs: number };
      timeline: { t: number; actor: string; kind: string; stale?: boolean }[];
    };
    assert.equal(doc.outcome, 'overwritten');
    assert.deepEqual(doc.tokens, { a: '33', b: '34' });
    assert.deepEqual(
      [doc.parameters.fault, doc.parameters.fencing, doc.parameters.pauseMs],
      ['delayed_request', false, 12_000],
    );
    assert.equal(doc.timeline.filter((e) => e.stale === true).length, 1);
    assert.ok(doc.timeline.some((e) => e.actor === 'Lock' && e.kind === 'expire'));
  });

  it('rejects an unknown --fault with exit code 64 (usage)', async () => {
    const r = await runCli(['demo', '--fault', 'meteor']);
    assert.equal(r.code, 64);
    assert.match(r.err, /--fault must be one of pause, delayed_request, lost_renewal, got meteor/);
  });
});
