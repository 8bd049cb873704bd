import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { spawnCli } from '../support/cli.js';
import { tempDir } from '../support/tmp.js';

// `leasehold sim` as a user runs it: a process, its output and its exit code (docs/cli.md,
// "sim run, sim sweep"). The seeds are fixed, so what they print is fixed too.

/** The `key=value` figures of the first line matching `prefix` (a `figures:` or sweep line). */
function figures(out: string, prefix: RegExp): Record<string, string> {
  const line = out.split('\n').find((l) => prefix.test(l));
  assert.ok(line !== undefined, `no line matching ${prefix} in:\n${out}`);
  return Object.fromEntries([...line.matchAll(/(\w+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]));
}

describe('leasehold sim run | sweep (real processes)', () => {
  const tmp = tempDir('cli-sim');
  after(() => tmp.remove());

  async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
    const p = spawnCli(args, { cwd: tmp.dir });
    const code = await p.exited;
    return { code, out: p.stdout(), err: p.stderr() };
  }

  it('run --seed 7 prints the seed, its faults and a VALID verdict and exits 0; the same seed prints the same twice; its saved history checks the same', async () => {
    const history = join(tmp.dir, 'h.jsonl');
    const first = await cli('sim', 'run', '--seed', '7', '--history', history);
    assert.equal(first.code, 0, first.err);
    const lines = first.out.trimEnd().split('\n');
    // The example of docs/cli.md.
    assert.equal(lines[0], 'seed 7 (fenced); faults: pause_before_write, freeze');
    assert.equal(lines.at(-1), 'verdict: VALID — no safety invariant violated');
    for (const inv of ['I1', 'I2', 'I3', 'I4', 'I5', 'I6', 'I7'])
      assert.match(first.out, new RegExp(`^${inv} [^:]+: ok`, 'm'), inv);
    const f = figures(first.out, /^figures:/);
    assert.equal(f['stale_writes_accepted'], '0');
    assert.ok(Number(f['stale_writes_rejected']) >= 1, first.out);

    const again = await cli('sim', 'run', '--seed', '7');
    assert.equal(again.code, 0, again.err);
    assert.equal(again.out, first.out, 'the same seed gives the same run');

    const checked = await cli('check', history);
    assert.equal(checked.code, 0, checked.err);
    assert.match(checked.out, /verdict: VALID/);
    assert.deepEqual(figures(checked.out, /^figures:/), f);
    assert.match(readFileSync(history, 'utf8'), /^\{"type":"meta"/);
  });

  it('seed 8: fenced, the resource rejects the 3 stale writes (0 accepted, exit 0); the unfenced control accepts all 3 (I1 violated, exit 1)', async () => {
    const fenced = await cli('sim', 'run', '--seed', '8');
    assert.equal(fenced.code, 0, fenced.err);
    assert.match(fenced.out, /^seed 8 \(fenced\); faults: .*pause_before_write/);
    const f = figures(fenced.out, /^figures:/);
    assert.equal(f['stale_writes_rejected'], '3');
    assert.equal(f['stale_writes_accepted'], '0');

    const control = await cli('sim', 'run', '--seed', '8', '--no-fencing');
    assert.equal(control.code, 1, control.err);
    assert.match(control.out, /^seed 8 \(unfenced control arm\); faults: /);
    assert.match(control.out, /^I1 resource fencing: VIOLATED/m);
    assert.match(control.out, /^verdict: INVALID — I1/m);
    const c = figures(control.out, /^figures:/);
    assert.equal(c['stale_writes_accepted'], '3');
    assert.equal(c['fenced_writes_attempted'], '0');
  });

  it('sweep: 20 fenced seeds have no failing seed and accept no stale write (exit 0); --control over the same seeds shows the anomaly (exit 0)', async () => {
    const fenced = await cli('sim', 'sweep', '--seeds', '20');
    assert.equal(fenced.code, 0, fenced.out + fenced.err);
    const f = figures(fenced.out, /^sim fenced seeds 1\.\.20:/);
    assert.equal(f['runs'], '20');
    assert.equal(f['failing_seeds'], '0');
    assert.equal(f['stale_writes_accepted'], '0');
    assert.ok(Number(f['stale_writes_rejected']) > 0, fenced.out);
    assert.doesNotMatch(fenced.out, /^FAIL /m);

    const control = await cli('sim', 'sweep', '--seeds', '20', '--control');
    assert.equal(control.code, 0, control.out + control.err);
    const c = figures(control.out, /^sim unfenced seeds 1\.\.20:/);
    assert.ok(Number(c['stale_writes_accepted']) > 0, control.out);
    const m = /^control arm: anomaly .* in (\d+)\/20 runs$/m.exec(control.out);
    assert.ok(m !== null && Number(m[1]) > 0, control.out);
  });

  it('--bug reuse_token: the checker catches the planted store bug (I2 violated, exit 1)', async () => {
    const r = await cli('sim', 'run', '--seed', '7', '--bug', 'reuse_token');
    assert.equal(r.code, 1, r.err);
    assert.match(r.out, /^seed 7 \(fenced, planted bug reuse_token\)/);
    assert.match(r.out, /^I2 token order and uniqueness: VIOLATED/m);
    assert.match(r.out, /^verdict: INVALID — I2/m);
  });

  it('sweep --workload sets: 2 seeds pass (exit 0); --bug non_atomic_set is caught by I11 with a replay command (exit 1); a lock-set bug is refused (exit 64, usage)', async () => {
    const ok = await cli('sim', 'sweep', '--workload', 'sets', '--seeds', '2');
    assert.equal(ok.code, 0, ok.out + ok.err);
    const f = figures(ok.out, /^sim sets seeds 1\.\.2:/);
    assert.equal(f.failing_seeds, '0');
    assert.equal(f.stale_writes_accepted, '0');
    assert.ok(Number(f.sets_held) > 0, ok.out);
    const bug = await cli(
      'sim',
      'sweep',
      '--workload',
      'sets',
      '--bug',
      'non_atomic_set',
      '--seeds',
      '1',
    );
    assert.equal(bug.code, 1, bug.out + bug.err);
    assert.match(
      bug.out,
      /^FAIL seed 1 \(I11\) — replay: .*--workload sets --from 1 --seeds 1 --bug non_atomic_set$/m,
    );
    assert.match(bug.out, /^planted bug non_atomic_set: caught in 1\/1 seeds$/m);
    const wrong = await cli('sim', 'sweep', '--workload', 'sets', '--bug', 'reuse_token');
    assert.equal(wrong.code, 64, wrong.out + wrong.err);
    assert.match(wrong.err, /--bug must be one of slot_limit_off_by_one/);
  });
});
