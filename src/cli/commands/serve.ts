import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { parseDuration } from '../../core/duration.js';
import { invalidArgument } from '../../core/errors.js';
import { loadServerConfig, type ServerConfigFile } from '../../server/config.js';
import { openStore, storeSchemes } from '../../stores/open-store.js';
import { startRetention } from './prune.js';
import { action, cliDuration, closeQuietly, DEFAULT_STORE, UsageError } from '../common.js';
import { EXIT } from '../exit-codes.js';
import { FEATURE_PACKAGES, requirePackages } from '../optional-packages.js';
import { checkAtStart, storeTarget, openListenerWarning, START_TRY_MS } from '../start-checks.js';

interface ServeFlags {
  store?: string;
  host?: string;
  port?: string;
  config?: string;
  tlsCert?: string;
  tlsKey?: string;
  logLevel?: string;
  waitForStore?: string;
  allowNoAuth?: boolean;
  retain?: string;
}

function parsePort(value: string | number | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n =
    typeof value === 'number' ? value : /^\d{1,5}$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw invalidArgument('port', 'must be from 0 to 65535', value);
  return n;
}

/** Registers `leasehold serve`: the HTTP lease server. */
export function registerServeCommand(program: Command): void {
  program
    .command('serve')
    .description(
      'Run the leasehold HTTP server (API /v1, /metrics, /healthz, /readyz, dashboard at /) over a lease store.',
    )
    .option(
      '--store <url>',
      `lease store: ${storeSchemes()
        .map((s) => `${s}:`)
        .join(' ')} (default ${DEFAULT_STORE}; env LEASEHOLD_STORE)`,
    )
    .option('--host <host>', 'interface to listen on (default 127.0.0.1)')
    .option('--port <port>', 'port; 0 picks a free one (default 7400)')
    .option(
      '--config <file>',
      'JSON config file: store, listen, tls, auth tokens, limits, logLevel (see docs/server.md)',
    )
    .option('--tls-cert <file>', 'serve HTTPS with this PEM certificate (with --tls-key)')
    .option('--tls-key <file>', 'PEM private key for --tls-cert')
    .option(
      '--log-level <level>',
      'pino log level on stderr: fatal error warn info debug silent (default info)',
    )
    .option(
      '--wait-for-store <duration>',
      'keep trying to reach the store at start for this long before giving up (default 0: one try)',
    )
    .option(
      '--retain <duration>',
      'delete released keys and keys expired this long ago in the background (see `leasehold prune`)',
    )
    .option('--allow-no-auth', 'no warning when listening beyond loopback without auth tokens')
    .addHelpText(
      'after',
      `
Before listening, serve checks that the store answers. If it does not (within
--wait-for-store), serve exits 69 with one line naming the store, its address and the cause.
The first line on stdout is "leasehold listening on URL (store: …)". Logs are JSON on stderr.
SIGTERM or SIGINT stops gracefully: new requests get 503, waiting acquires answer unavailable,
event streams end, in-flight requests finish. Leases live in the store, not in the server.

Examples:
  leasehold serve                                   # SQLite in ./leasehold.db on 127.0.0.1:7400
  leasehold serve --store memory: --port 0          # throwaway store on a free port
  leasehold serve --store 'postgres://leasehold@db:5432/app?schema=leases'   # shared PostgreSQL
  leasehold serve --store etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379   # etcd cluster
  leasehold serve --config /etc/leasehold.json      # auth tokens, TLS, limits`,
    )
    .action(
      action(async (flags: ServeFlags) => {
        const file: ServerConfigFile =
          flags.config === undefined ? {} : loadServerConfig(flags.config);
        if ((flags.tlsCert === undefined) !== (flags.tlsKey === undefined)) {
          throw new UsageError('--tls-cert and --tls-key go together');
        }
        const tlsPaths =
          flags.tlsCert !== undefined && flags.tlsKey !== undefined
            ? { cert: flags.tlsCert, key: flags.tlsKey }
            : file.tls;
        const storeUrl =
          flags.store ?? file.store ?? process.env['LEASEHOLD_STORE'] ?? DEFAULT_STORE;
        const port = parsePort(flags.port) ?? parsePort(file.listen?.port);
        const waitMs =
          flags.waitForStore === undefined
            ? 0
            : parseDuration('--wait-for-store', cliDuration(flags.waitForStore));
        if (waitMs < 0) throw invalidArgument('--wait-for-store', 'must not be negative', waitMs);
        // Loaded here so that client commands (run, status …) do not pay for Fastify, and so
        // that a library install without the server's packages can still run them.
        const sqlite = storeUrl.startsWith('sqlite:') || /^[^:]*\.db$/.test(storeUrl);
        await requirePackages('serve', [
          ...FEATURE_PACKAGES.server,
          ...(sqlite ? FEATURE_PACKAGES.sqlite : []),
        ]);
        const { createLeaseServer } = await import('../../server/server.js');
        // Many clients' grants arrive together here: let them share one fsync (SQLite).
        const store = await openStore(storeUrl, { groupCommit: true });
        let server;
        try {
          // A server that listens over a store it cannot reach fails every request while it
          // says it is up: refuse to start instead, in one line (docs/server.md).
          await checkAtStart({
            command: 'serve',
            target: storeTarget(storeUrl, 'lease store'),
            flag: '--wait-for-store',
            waitMs,
            attempt: (signal) =>
              store
                .inspect('leasehold/readyz', { timeoutMs: START_TRY_MS, signal })
                .then(() => undefined),
            say: (line) => process.stderr.write(`${line}\n`),
          });
          server = createLeaseServer({
            store,
            host: flags.host ?? file.listen?.host,
            port,
            auth: file.auth,
            tls: tlsPaths && { cert: readFileSync(tlsPaths.cert), key: readFileSync(tlsPaths.key) },
            bodyLimitBytes: file.limits?.bodyLimitBytes,
            maxWaitMs: file.limits?.maxWaitMs,
            requestTimeoutMs: file.limits?.requestTimeoutMs,
            logLevel: flags.logLevel ?? file.logLevel,
            closeStore: true,
          });
        } catch (err) {
          await closeQuietly(store);
          throw err;
        }
        const url = await server.listen();
        const warning = openListenerWarning({
          command: 'serve',
          host: flags.host ?? file.listen?.host ?? '127.0.0.1',
          authEnabled: (file.auth?.tokens?.length ?? 0) > 0,
          allowed: flags.allowNoAuth === true,
          risk: 'take, renew and release any lease',
        });
        if (warning !== undefined) process.stderr.write(`${warning}\n`);
        const shown =
          storeUrl.startsWith('sqlite:') || storeUrl === 'memory:' ? storeUrl : store.kind;
        // The handlers go in before the line: a supervisor may signal as soon as it reads it.
        const stopped = new Promise<number>((resolve) => {
          let stopping = false;
          const stop = (signal: NodeJS.Signals): void => {
            if (stopping) {
              process.stderr.write(`leasehold: second ${signal}, exiting now\n`);
              process.exit(128 + (signal === 'SIGINT' ? 2 : 15));
            }
            stopping = true;
            process.stderr.write(`leasehold: ${signal} received, shutting down\n`);
            server.close().then(
              () => resolve(EXIT.ok),
              (err: unknown) => {
                process.stderr.write(`leasehold: shutdown failed: ${String(err)}\n`);
                resolve(EXIT.error);
              },
            );
          };
          process.on('SIGTERM', stop);
          process.on('SIGINT', stop);
        });
        if (flags.retain !== undefined) {
          const retainMs = parseDuration('--retain', flags.retain);
          const stopRetention = startRetention(
            storeUrl,
            retainMs,
            Math.min(Math.max(retainMs, 10_000), 60_000),
          );
          void stopped.finally(stopRetention);
        }
        process.stdout.write(`leasehold listening on ${url} (store: ${shown})\n`);
        return stopped;
      }),
    );
}
