import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createGateway } from '../../../src/fencing/gateway/index.js';
import { dropSchema, PG_URL, uniqueSchema } from '../../support/postgres.js';
import { runsPerArm } from '../../support/fault-env.js';
import { tempDir } from '../../support/tmp.js';
import {
  killProcess,
  spawnGateway,
  staleWritesAccepted,
  startUpstream,
  tokensByPath,
  type Upstream,
} from './support.js';

const SCOPES = 4;
const WRITERS = 16;

/**
 * 16 writers on 4 scopes; writer w of scope s uses tokens that interleave with the others'
 * (each round takes the next token of its scope, so older and newer tokens race). Returns the
 * counts of answers.
 */
async function hammer(
  urls: readonly string[],
  rounds: number,
): Promise<{ ok: number; stale: number; other: number }> {
  const next = new Map<number, bigint>();
  const counts = { ok: 0, stale: 0, other: 0 };
  await Promise.all(
    Array.from({ length: WRITERS }, async (_, w) => {
      const scope = w % SCOPES;
      for (let r = 0; r < rounds; r++) {
        const token = (next.get(scope) ?? 0n) + 1n;
        next.set(scope, token);
        // Writers of one scope hold tokens of different ages: some go out with an older one.
        const sent = r % 3 === 2 && token > 2n ? token - 2n : token;
        const base = urls[(w + r) % urls.length]!;
        const res = await fetch(`${base}/items/${scope}`, {
          method: 'PUT',
          headers: { 'fencing-token': sent.toString() },
          body: `${w}:${r}`,
        });
        await res.arrayBuffer();
        if (res.status === 200) counts.ok++;
        else if (res.status === 409) counts.stale++;
        else counts.other++;
      }
    }),
  );
  return counts;
}

function slowUpstream(up: Upstream): void {
  // A little service time so that requests of one scope overlap in flight.
  let i = 0;
  up.onRequest = () =>
    new Promise<void>((resolve) =>
      setImmediate(() => (++i % 2 === 0 ? setTimeout(resolve, 2) : resolve())),
    );
}

describe('gateway concurrency: per scope, the upstream sees non-decreasing tokens', () => {
  it('16 writers, 4 scopes, one gateway', { timeout: 120_000 }, async () => {
    const tmp = tempDir('gw-conc');
    const up = await startUpstream();
    slowUpstream(up);
    const gw = await createGateway({
      upstream: up.url,
      routes: [{ methods: ['PUT'], path: '/items/:id', scope: 'item/{id}' }],
      marks: `sqlite:${tmp.dir}/marks.db`,
      port: 0,
      logLevel: 'silent',
    });
    try {
      const counts = await hammer([await gw.listen()], runsPerArm(15, 200));
      const stale = staleWritesAccepted(up.log);
      console.log(
        `one gateway: ${JSON.stringify(counts)}, upstream saw ${up.count()}, stale_writes_accepted ${stale}`,
      );
      assert.equal(stale, 0);
      assert.equal(counts.other, 0);
      assert.ok(counts.stale > 0, 'older tokens were really sent and refused');
      assert.equal(up.count(), counts.ok);
      for (const tokens of tokensByPath(up.log).values())
        for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i]! >= tokens[i - 1]!);
    } finally {
      await gw.close();
      await up.close();
      tmp.remove();
    }
  });

  it(
    'two gateway processes sharing PostgreSQL marks with --replicas scope-lock',
    { timeout: 180_000 },
    async () => {
      const schema = uniqueSchema('gwrep');
      const up = await startUpstream();
      slowUpstream(up);
      const args = [
        '--upstream',
        up.url,
        '--route',
        'PUT /items/:id=item/{id}',
        '--marks',
        `${PG_URL}?schema=${schema}`,
        '--replicas',
        'scope-lock',
      ];
      const a = await spawnGateway(args);
      const b = await spawnGateway(args);
      try {
        const counts = await hammer([a.url, b.url], runsPerArm(15, 150));
        const stale = staleWritesAccepted(up.log);
        console.log(
          `two gateways (scope-lock): ${JSON.stringify(counts)}, upstream saw ${up.count()}, stale_writes_accepted ${stale}`,
        );
        assert.equal(stale, 0);
        assert.equal(counts.other, 0);
        assert.equal(up.count(), counts.ok);
      } finally {
        await killProcess(a.cli.child, a.cli.exited);
        await killProcess(b.cli.child, b.cli.exited);
        await up.close();
        await dropSchema(schema);
      }
    },
  );

  it('scope-lock is refused without PostgreSQL marks', { timeout: 60_000 }, async () => {
    const tmp = tempDir('gw-rep');
    const up = await startUpstream();
    try {
      await assert.rejects(
        createGateway({
          upstream: up.url,
          routes: [{ path: '/a', scope: 'a' }],
          marks: `sqlite:${tmp.dir}/m.db`,
          replicas: 'scope-lock',
          port: 0,
          logLevel: 'silent',
        }),
        /scope-lock needs PostgreSQL marks/,
      );
    } finally {
      await up.close();
      tmp.remove();
    }
  });
});
