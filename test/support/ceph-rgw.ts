import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { freePort } from './ports.js';
import { eventually } from './time.js';
import { tempDir } from './tmp.js';

const run = promisify(execFile);

/** The S3 user the gateway is given (it checks signatures, so the client must sign as it). */
const ACCESS_KEY = 'LEASEHOLDTEST';
const SECRET_KEY = 'leasehold-test-secret';

/**
 * The smallest Ceph that serves S3: one monitor, one OSD that keeps its objects in memory
 * (memstore), one RADOS Gateway, on loopback only, without authentication between them, one
 * copy of each pool and few placement groups (one OSD holds them all).
 */
function cephConf(dir: string, fsid: string, monPort: number, rgwPort: number): string {
  return `[global]
fsid = ${fsid}
mon host = v1:127.0.0.1:${monPort}
mon initial members = a
auth cluster required = none
auth service required = none
auth client required = none
ms bind ipv4 = true
ms bind ipv6 = false
ms bind msgr2 = false
osd objectstore = memstore
memstore device bytes = 268435456
osd fast shutdown = false
osd crush chooseleaf type = 0
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
run dir = ${dir}/run
admin socket = ${dir}/run/$name.asok
log file = ${dir}/log/$name.log
mon data = ${dir}/mon/$cluster-$id
osd data = ${dir}/osd/$cluster-$id
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:${rgwPort}
rgw thread pool size = 16
rgw data = ${dir}/rgw
`;
}

/** A running gateway with one bucket, and the client settings to reach it. */
export interface RadosGateway {
  readonly endpoint: string;
  readonly clientConfig: {
    endpoint: string;
    region: string;
    forcePathStyle: boolean;
    credentials: { accessKeyId: string; secretAccessKey: string };
  };
  /** Stops the three daemons (SIGTERM, then SIGKILL after 10 s) and removes their files. */
  stop(): Promise<void>;
}

/**
 * Starts a throwaway Ceph (Debian's `ceph-mon`, `ceph-osd`, `radosgw`) on free loopback ports
 * in a temporary directory, with one S3 user and the bucket `bucket`: an S3-compatible server
 * that honours `If-None-Match: *` on PutObject, which s3rver ignores. About 15 s on a loaded
 * 2-core machine.
 * Fails (no silent skip) when the Debian packages are missing: scripts/setup-test-env.sh
 * installs them.
 */
export async function startRadosGateway(bucket: string): Promise<RadosGateway> {
  const tmp = tempDir('ceph-rgw');
  const dir = tmp.dir;
  for (const sub of ['run', 'log', 'mon/ceph-a', 'osd/ceph-0', 'rgw']) {
    mkdirSync(join(dir, sub), { recursive: true });
  }
  const children: { name: string; child: ChildProcess; exited: Promise<void> }[] = [];
  const daemon = (name: string, cmd: string, args: string[]): void => {
    const out = openSync(join(dir, 'log', `${name}.out`), 'a');
    const child = spawn(cmd, args, { stdio: ['ignore', out, out] });
    closeSync(out);
    child.once('error', () => undefined);
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    children.push({ name, child, exited });
  };
  const stop = async (): Promise<void> => {
    for (const { child, exited } of [...children].reverse()) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    tmp.remove();
  };
  try {
    const [monPort, rgwPort] = [await freePort(), await freePort()];
    const fsid = randomUUID();
    const conf = join(dir, 'ceph.conf');
    writeFileSync(conf, cephConf(dir, fsid, monPort, rgwPort));
    const c = ['-c', conf];
    const monmap = join(dir, 'monmap');
    await run('monmaptool', [
      '--create',
      '--add',
      'a',
      `v1:127.0.0.1:${monPort}`,
      '--fsid',
      fsid,
      monmap,
    ]);
    await run('ceph-mon', [...c, '--mkfs', '-i', 'a', '--monmap', monmap]);
    daemon('mon', 'ceph-mon', [...c, '-i', 'a', '-f']);
    const osdUuid = randomUUID();
    await run('ceph', [...c, '--connect-timeout', '60', 'osd', 'new', osdUuid], {
      timeout: 90_000,
    });
    await run('ceph-osd', [...c, '-i', '0', '--mkfs', '--osd-uuid', osdUuid]);
    daemon('osd', 'ceph-osd', [...c, '-i', '0', '-f']);
    daemon('rgw', 'radosgw', [...c, '-n', 'client.rgw', '-f']);
    const endpoint = `http://127.0.0.1:${rgwPort}`;
    await eventually(
      `the RADOS Gateway to answer on ${endpoint}`,
      async () => {
        const dead = children.find((d) => d.child.exitCode !== null || d.child.signalCode !== null);
        if (dead !== undefined) throw new Error(`ceph ${dead.name} exited while starting`);
        try {
          await fetch(endpoint, { signal: AbortSignal.timeout(2000) });
          return true;
        } catch {
          return undefined;
        }
      },
      { timeoutMs: 120_000, intervalMs: 250 },
    );
    await run('radosgw-admin', [
      ...c,
      'user',
      'create',
      '--uid=leasehold',
      '--display-name=leasehold',
      `--access-key=${ACCESS_KEY}`,
      `--secret-key=${SECRET_KEY}`,
    ]);
    const clientConfig = {
      endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET_KEY },
    };
    const client = new S3Client(clientConfig);
    try {
      await client.send(new CreateBucketCommand({ Bucket: bucket }));
    } finally {
      client.destroy();
    }
    return { endpoint, clientConfig, stop };
  } catch (err) {
    const logs = ['mon', 'osd', 'rgw']
      .map((n) => {
        try {
          return `--- ${n}:\n${readFileSync(join(dir, 'log', `${n}.out`), 'utf8').slice(-2000)}`;
        } catch {
          return '';
        }
      })
      .join('\n');
    await stop();
    throw new Error(`could not start Ceph's RADOS Gateway: ${String(err)}\n${logs}`, {
      cause: err,
    });
  }
}
