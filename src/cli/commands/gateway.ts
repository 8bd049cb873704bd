import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { parseDuration } from '../../core/duration.js';
import { invalidArgument } from '../../core/errors.js';
import type { GatewayConfigFile } from '../../fencing/gateway/config.js';
import type { GatewayOptions } from '../../fencing/gateway/options.js';
import type { GatewayRoute } from '../../fencing/gateway/routes.js';
import type { MarkStore } from '../../fencing/marks/mark-store.js';
import { action, cliDuration, UsageError } from '../common.js';
import { EXIT } from '../exit-codes.js';
import { FEATURE_PACKAGES, requirePackages } from '../optional-packages.js';
import { checkAtStart, storeTarget, openListenerWarning, probeUpstream } from '../start-checks.js';

interface GatewayFlags {
  upstream?: string;
  config?: string;
  route?: string[];
  policy?: string;
  marks?: string;
  listen?: string;
  replicas?: string;
  upstreamTimeout?: string;
  tlsCert?: string;
  tlsKey?: string;
  upstreamCa?: string;
  report?: string;
  reportResource?: string;
  logLevel?: string;
  waitForMarks?: string;
  allowNoAuth?: boolean;
}

function parseListen(value: string | undefined): { host?: string; port?: number } {
  if (value === undefined) return {};
  const m = /^(?:(\[[^\]]+\]|[^:]+):)?(\d{1,5})$/.exec(value);
  const port = m?.[2] === undefined ? Number.NaN : Number(m[2]);
  if (m === null || port > 65535)
    throw invalidArgument('--listen', 'must be PORT or HOST:PORT', value);
  return { ...(m[1] === undefined ? {} : { host: m[1].replace(/^\[|\]$/g, '') }), port };
}

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** Registers `leasehold gateway`: the HTTP fencing gateway in front of an upstream API. */
export function registerGatewayCommand(program: Command): void {
  program
    .command('gateway')
    .description(
      'Run the HTTP fencing gateway: a reverse proxy that refuses stale fencing tokens before they reach the upstream.',
    )
    .option('--upstream <url>', 'the API behind the gateway (http:// or https://)')
    .option('--config <file>', 'routes file, YAML or JSON (see docs/gateway.md)')
    .option(
      '--route <spec>',
      "one route, 'METHOD[,METHOD] PATH=SCOPE' (scope template with {param}, or header:NAME); repeatable",
      collect,
    )
    .option('--policy <policy>', "policy of --route routes: '>=' (default) or '>'")
    .option(
      '--marks <url>',
      'mark store: sqlite:PATH (default sqlite:./gateway.db), postgres://…, redis://…',
    )
    .option('--listen <addr>', 'PORT or HOST:PORT to listen on (default 127.0.0.1:7480)')
    .option(
      '--replicas <mode>',
      'single (default) or scope-lock (several gateways on PostgreSQL marks)',
    )
    .option('--upstream-timeout <ms>', 'bound on waiting for the upstream (default 30000)')
    .option('--tls-cert <file>', 'serve HTTPS with this PEM certificate (with --tls-key)')
    .option('--tls-key <file>', 'PEM private key for --tls-cert')
    .option('--upstream-ca <file>', 'extra CA (PEM) to trust for an https:// upstream')
    .option(
      '--report <url>',
      'report decisions to this leasehold server (env LEASEHOLD_REPORT_TOKEN: its bearer token)',
    )
    .option(
      '--report-resource <name>',
      "the resource name the server shows for these decisions (default: the upstream's host:port)",
    )
    .option('--log-level <level>', 'pino log level on stderr (default info)')
    .option(
      '--wait-for-marks <duration>',
      'keep trying to reach the mark store at start for this long before giving up (default 0: one try)',
    )
    .option('--allow-no-auth', 'no warning when listening beyond loopback without auth tokens')
    .addHelpText(
      'after',
      `
Before listening, the gateway checks that the mark store answers; if it does not (within
--wait-for-marks), it exits 69 with one line naming the store, its address and the cause.
An upstream that cannot be reached at start is only a warning: requests get 502 until it is.
The first line on stdout is "leasehold gateway listening on URL (upstream: …, marks: …)".
Clients send their token in Fencing-Token; stale ones get 409 stale_fence and never reach the
upstream. Gateway endpoints: /_leasehold/healthz, /_leasehold/readyz, /_leasehold/metrics,
/_leasehold/marks?scope=S.

Examples:
  leasehold gateway --upstream http://127.0.0.1:9000 --route 'PUT /reports/:id=report/{id}'
  leasehold gateway --upstream https://files.internal --config routes.yaml --marks postgres://gw@db/app
  leasehold gateway --config routes.yaml --marks postgres://gw@db/app --replicas scope-lock`,
    )
    .action(
      action(async (flags: GatewayFlags) => {
        await requirePackages('gateway', FEATURE_PACKAGES.gateway);
        const { loadGatewayConfig } = await import('../../fencing/gateway/config.js');
        const { parseRouteFlag } = await import('../../fencing/gateway/routes.js');
        const file: GatewayConfigFile =
          flags.config === undefined ? {} : loadGatewayConfig(flags.config);
        if ((flags.tlsCert === undefined) !== (flags.tlsKey === undefined))
          throw new UsageError('--tls-cert and --tls-key go together');
        const policy = flags.policy;
        if (policy !== undefined && policy !== '>=' && policy !== '>')
          throw new UsageError("--policy must be '>=' or '>'");
        const routes: GatewayRoute[] = [
          ...(file.routes ?? []),
          ...(flags.route ?? []).map((r) => parseRouteFlag(r, policy)),
        ];
        const upstream = flags.upstream ?? file.upstream;
        if (upstream === undefined)
          throw new UsageError('--upstream (or upstream in --config) is required');
        if (routes.length === 0)
          throw new UsageError('give at least one --route or a --config with routes');
        const listen = flags.listen === undefined ? (file.listen ?? {}) : parseListen(flags.listen);
        const replicas = flags.replicas ?? file.replicas;
        if (replicas !== undefined && replicas !== 'single' && replicas !== 'scope-lock')
          throw new UsageError('--replicas must be single or scope-lock');
        const tls =
          flags.tlsCert !== undefined && flags.tlsKey !== undefined
            ? { cert: flags.tlsCert, key: flags.tlsKey }
            : file.tls;
        const ca = flags.upstreamCa ?? file.upstreamTls?.ca;
        const reportUrl = flags.report ?? file.report?.url;
        const reportToken = process.env['LEASEHOLD_REPORT_TOKEN'] ?? file.report?.apiToken;
        const timeout =
          flags.upstreamTimeout === undefined
            ? file.limits?.upstreamTimeoutMs
            : Number(flags.upstreamTimeout);
        const waitMs =
          flags.waitForMarks === undefined
            ? 0
            : parseDuration('--wait-for-marks', cliDuration(flags.waitForMarks));
        if (waitMs < 0) throw invalidArgument('--wait-for-marks', 'must not be negative', waitMs);
        const options: Omit<GatewayOptions, 'marks'> = {
          upstream,
          routes,
          ...listen,
          ...(replicas === undefined ? {} : { replicas }),
          ...(file.unmatched === undefined ? {} : { unmatched: file.unmatched }),
          ...(file.auth === undefined ? {} : { auth: file.auth }),
          ...(file.headers === undefined ? {} : { headers: file.headers }),
          ...(timeout === undefined ? {} : { upstreamTimeoutMs: timeout }),
          ...(file.limits?.maxQueuePerScope === undefined
            ? {}
            : { maxQueuePerScope: file.limits.maxQueuePerScope }),
          ...(file.limits?.maxBodyBytes === undefined
            ? {}
            : { maxBodyBytes: file.limits.maxBodyBytes }),
          ...(tls === undefined
            ? {}
            : { tls: { cert: readFileSync(tls.cert), key: readFileSync(tls.key) } }),
          ...(ca === undefined && file.upstreamTls === undefined
            ? {}
            : {
                upstreamTls: {
                  ...(ca === undefined ? {} : { ca: readFileSync(ca) }),
                  ...(file.upstreamTls?.rejectUnauthorized === undefined
                    ? {}
                    : { rejectUnauthorized: file.upstreamTls.rejectUnauthorized }),
                },
              }),
          ...((flags.logLevel ?? file.logLevel)
            ? { logLevel: flags.logLevel ?? file.logLevel }
            : {}),
        };
        const { createGateway } = await import('../../fencing/gateway/gateway.js');
        const { resolveGatewayOptions } = await import('../../fencing/gateway/options.js');
        // Every setting is checked before anything is opened or connected.
        const upstreamUrl = resolveGatewayOptions(options).upstream;
        const report =
          reportUrl === undefined
            ? undefined
            : {
                url: reportUrl,
                ...(reportToken === undefined ? {} : { apiToken: reportToken }),
                // Without a name the server's dashboard could only say "(unnamed)": the
                // gateway protects its upstream, so the upstream's host:port names it.
                resource: flags.reportResource ?? file.report?.resource ?? upstreamUrl.host,
              };
        const upstreamProblem = probeUpstream(upstreamUrl);
        const marksUrl = flags.marks ?? file.marks ?? 'sqlite:./gateway.db';
        const marks = await openMarks(marksUrl, waitMs);
        let gateway;
        try {
          gateway = await createGateway({
            ...options,
            marks,
            ...(report === undefined ? {} : { report }),
          });
        } catch (err) {
          await marks.close().catch(() => undefined);
          throw err;
        }
        // Not a reason to refuse to start: the upstream may come up later, and until then each
        // request is answered 502. Said once here, so that a wrong address is seen at once.
        const why = await upstreamProblem;
        if (why !== undefined)
          process.stderr.write(
            `leasehold gateway: warning: the upstream ${upstreamUrl.origin} is not reachable now (${why}); starting anyway, and requests to it are answered 502 until it is\n`,
          );
        const url = await gateway.listen();
        const warning = openListenerWarning({
          command: 'gateway',
          host: listen.host ?? '127.0.0.1',
          authEnabled: (file.auth?.tokens?.length ?? 0) > 0,
          allowed: flags.allowNoAuth === true,
          risk: `send writes through to ${upstreamUrl.origin} and read the marks`,
        });
        if (warning !== undefined) process.stderr.write(`${warning}\n`);
        const shownMarks = marksUrl.startsWith('sqlite:') ? marksUrl : marks.kind;
        // The handlers go in before the line: a supervisor may signal as soon as it reads it.
        const stopped = new Promise<number>((resolve) => {
          let stopping = false;
          const stop = (signal: NodeJS.Signals): void => {
            if (stopping) process.exit(128 + (signal === 'SIGINT' ? 2 : 15));
            stopping = true;
            process.stderr.write(`leasehold gateway: ${signal} received, shutting down\n`);
            // The gateway closes what it opened; the marks were opened here.
            gateway
              .close()
              .then(() => marks.close())
              .then(
                () => resolve(EXIT.ok),
                (err: unknown) => {
                  process.stderr.write(`leasehold gateway: shutdown failed: ${String(err)}\n`);
                  resolve(EXIT.error);
                },
              );
          };
          process.on('SIGTERM', stop);
          process.on('SIGINT', stop);
        });
        process.stdout.write(
          `leasehold gateway listening on ${url} (upstream: ${upstreamUrl.origin}, marks: ${shownMarks})\n`,
        );
        return stopped;
      }),
    );
}

/**
 * Opens the mark store the URL names and checks that it answers, trying for up to `waitMs`
 * (one try when 0): a gateway over marks it cannot reach would refuse every fenced request
 * while it says it is up. Throws `ERR_UNAVAILABLE` with one line naming the store, its address
 * and the cause (exit 69).
 */
async function openMarks(url: string, waitMs: number): Promise<MarkStore> {
  const { openMarkStore } = await import('../../fencing/marks/open-mark-store.js');
  let marks: MarkStore | undefined;
  await checkAtStart({
    command: 'gateway',
    target: storeTarget(url, 'mark store'),
    flag: '--wait-for-marks',
    waitMs,
    attempt: async () => {
      // A PostgreSQL mark store connects as it opens; a failed open holds no connection.
      marks ??= await openMarkStore(url);
      await marks.read('leasehold/readyz');
    },
    say: (line) => process.stderr.write(`${line}\n`),
  }).catch(async (err: unknown) => {
    await marks?.close().catch(() => undefined);
    throw err;
  });
  return marks!;
}
