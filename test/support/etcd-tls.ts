import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from './ports.js';
import { etcdctl } from './etcdctl.js';
import { eventually } from './time.js';
import { tempDir } from './tmp.js';

/** PEM files and bytes of one certificate and its key. */
export interface CertFiles {
  readonly certPath: string;
  readonly keyPath: string;
  readonly cert: Buffer;
  readonly key: Buffer;
}

/** The users the fixture creates: name → password. */
export const ETCD_USERS = Object.freeze({
  root: 'root-pw',
  /** Read-write on keys under {@link ETCD_APP_PREFIX} only. */
  app: 'app-pw',
  /** Read-write on keys under `other/` only: no permission on the app's prefix. */
  outsider: 'outsider-pw',
});

/** The key prefix the `app` user's role may read and write. */
export const ETCD_APP_PREFIX = 'locks/';

/** Options of {@link startSecureEtcd}. */
export interface SecureEtcdOptions {
  /** Number of members. Defaults to 3. */
  readonly size?: number;
}

/** A running TLS + RBAC etcd cluster: endpoints, the CA and a client certificate. */
export interface SecureEtcd {
  /** `https://127.0.0.1:PORT` of every member. */
  readonly endpoints: string[];
  /** The test CA that signed every certificate: what clients trust. */
  readonly ca: CertFiles;
  /** A client certificate (CN `app`) signed by the CA, for mutual TLS. */
  readonly client: CertFiles;
  /** etcdctl's TLS and user flags, e.g. for `etcdctl(endpoints, [...ctlFlags('root'), 'get', 'x'])`. */
  ctlFlags(user?: keyof typeof ETCD_USERS): string[];
  /** SIGKILLs every member and removes the data and certificates. Safe to repeat. */
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const p of live) {
    try {
      p.kill('SIGCONT');
      p.kill('SIGKILL');
    } catch {
      // gone
    }
  }
});

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: 'ignore' });
}

/** EC P-256 key and certificate signed by the CA in `dir`, valid one day. */
function issue(dir: string, name: string, cn: string, ext: string): CertFiles {
  const keyPath = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const certPath = join(dir, `${name}.pem`);
  const extFile = join(dir, `${name}.ext`);
  writeFileSync(extFile, ext);
  openssl([
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    keyPath,
    '-out',
    csr,
    '-subj',
    `/CN=${cn}`,
  ]);
  openssl([
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    join(dir, 'ca.pem'),
    '-CAkey',
    join(dir, 'ca.key'),
    '-CAcreateserial',
    '-out',
    certPath,
    '-days',
    '1',
    '-extfile',
    extFile,
  ]);
  return { certPath, keyPath, cert: readFileSync(certPath), key: readFileSync(keyPath) };
}

/**
 * Generates a throwaway CA, a server certificate for 127.0.0.1 and a client certificate
 * (openssl, EC P-256, valid one day) into `dir`.
 */
export function makeTestPki(dir: string): { ca: CertFiles; server: CertFiles; client: CertFiles } {
  const caKey = join(dir, 'ca.key');
  const caPem = join(dir, 'ca.pem');
  openssl([
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    caKey,
    '-out',
    caPem,
    '-days',
    '1',
    '-subj',
    '/CN=leasehold test CA',
  ]);
  const ca = {
    certPath: caPem,
    keyPath: caKey,
    cert: readFileSync(caPem),
    key: readFileSync(caKey),
  };
  const server = issue(
    dir,
    'server',
    'etcd',
    'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n',
  );
  const client = issue(dir, 'client', 'app', 'extendedKeyUsage=clientAuth\n');
  return { ca, server, client };
}

/**
 * A 3-member etcd cluster on loopback with client TLS (certificates from {@link makeTestPki},
 * client certificates required: `--client-cert-auth`) and RBAC enabled through etcdctl: a
 * `root` user, an `app` user whose role may read and write only keys under
 * {@link ETCD_APP_PREFIX}, and an `outsider` limited to `other/`. Peers talk plain HTTP on
 * loopback. Members run a 500 ms election timeout, so 1 s TTLs are honoured.
 */
export async function startSecureEtcd(options: SecureEtcdOptions = {}): Promise<SecureEtcd> {
  const size = options.size ?? 3;
  const tmp = tempDir('etcd-tls');
  const procs: ChildProcess[] = [];
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    await Promise.all(
      procs.map(async (p) => {
        if (p.exitCode !== null || p.signalCode !== null) return;
        const exited = new Promise((r) => p.once('exit', r));
        p.kill('SIGCONT');
        p.kill('SIGKILL');
        await exited;
      }),
    );
    tmp.remove();
  };
  try {
    const pki = makeTestPki(tmp.dir);
    const members: Array<{ name: string; client: string; peer: string }> = [];
    for (let i = 0; i < size; i++) {
      members.push({
        name: `s${i + 1}`,
        client: `https://127.0.0.1:${await freePort()}`,
        peer: `http://127.0.0.1:${await freePort()}`,
      });
    }
    const initial = members.map((m) => `${m.name}=${m.peer}`).join(',');
    // One token for the whole cluster: members with different tokens never form one.
    const token = `lh-tls-${process.pid}-${Date.now()}`;
    const logs: string[] = members.map(() => '');
    members.forEach((m, i) => {
      const p = spawn(
        'etcd',
        [
          '--name',
          m.name,
          '--data-dir',
          join(tmp.dir, m.name),
          '--listen-client-urls',
          m.client,
          '--advertise-client-urls',
          m.client,
          '--listen-peer-urls',
          m.peer,
          '--initial-advertise-peer-urls',
          m.peer,
          '--initial-cluster',
          initial,
          '--initial-cluster-state',
          'new',
          '--initial-cluster-token',
          token,
          '--cert-file',
          pki.server.certPath,
          '--key-file',
          pki.server.keyPath,
          '--trusted-ca-file',
          pki.ca.certPath,
          '--client-cert-auth',
          '--heartbeat-interval',
          '50',
          '--election-timeout',
          '500',
          '--log-level',
          'error',
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      p.stderr?.on('data', (d: Buffer) => {
        logs[i] = (logs[i] + d.toString()).slice(-4000);
      });
      p.once('error', (err) => {
        logs[i] += `\nspawn error: ${String(err)}`;
      });
      p.once('exit', () => live.delete(p));
      live.add(p);
      procs.push(p);
    });
    const endpoints = members.map((m) => m.client);
    const ctlFlags = (user?: keyof typeof ETCD_USERS): string[] => [
      '--cacert',
      pki.ca.certPath,
      '--cert',
      pki.client.certPath,
      '--key',
      pki.client.keyPath,
      ...(user === undefined ? [] : ['--user', `${user}:${ETCD_USERS[user]}`]),
    ];
    const run = async (args: string[], user?: keyof typeof ETCD_USERS): Promise<string> => {
      const ctl = etcdctl(endpoints, [...ctlFlags(user), ...args]);
      const code = await ctl.exited;
      if (code !== 0) throw new Error(`etcdctl ${args.join(' ')} failed (${code}): ${ctl.out}`);
      return ctl.out;
    };
    await eventually(
      'every TLS etcd member to report healthy',
      async () => {
        const dead = procs.findIndex((p) => p.exitCode !== null);
        if (dead >= 0) throw new Error(`etcd member s${dead + 1} exited: ${logs[dead]}`);
        try {
          await run(['endpoint', 'health', '--command-timeout=2s']);
          return true;
        } catch {
          return undefined;
        }
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    // RBAC as an operator sets it up: users, a role per prefix, then auth on.
    await run(['user', 'add', 'root', `--new-user-password=${ETCD_USERS.root}`]);
    await run(['role', 'add', 'leasehold']);
    await run([
      'role',
      'grant-permission',
      'leasehold',
      '--prefix=true',
      'readwrite',
      ETCD_APP_PREFIX,
    ]);
    await run(['user', 'add', 'app', `--new-user-password=${ETCD_USERS.app}`]);
    await run(['user', 'grant-role', 'app', 'leasehold']);
    await run(['role', 'add', 'elsewhere']);
    await run(['role', 'grant-permission', 'elsewhere', '--prefix=true', 'readwrite', 'other/']);
    await run(['user', 'add', 'outsider', `--new-user-password=${ETCD_USERS.outsider}`]);
    await run(['user', 'grant-role', 'outsider', 'elsewhere']);
    await run(['auth', 'enable']);
    return { endpoints, ca: pki.ca, client: pki.client, ctlFlags, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
