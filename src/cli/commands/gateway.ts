import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { invalidArgument } from '../../core/errors.js';
import type { GatewayConfigFile } from '../../fencing/gateway/config.js';
import type { GatewayRoute } from '../../fencing/gateway/routes.js';
import { action, UsageError } from '../common.js';
import { EXIT } from '../exit-codes.js';
import { FEATURE_PACKAGES, requirePackages } from '../optional-packages.js';

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
  logLevel?: string;
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
    .option('--log-level <level>', 'pino log level on stderr (default info)')
    .addHelpText(
      'after',
      `
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
        const marks = flags.marks ?? file.marks ?? 'sqlite:./gateway.db';
        const { createGateway } = await import('../../fencing/gateway/gateway.js');
        const gateway = await createGateway({
          upstream,
          routes,
          marks,
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
          ...(reportUrl === undefined
            ? {}
            : {
                report: {
                  url: reportUrl,
                  ...(reportToken === undefined ? {} : { apiToken: reportToken }),
                  ...(file.report?.resource === undefined
                    ? {}
                    : { resource: file.report.resource }),
                },
              }),
          ...((flags.logLevel ?? file.logLevel)
            ? { logLevel: flags.logLevel ?? file.logLevel }
            : {}),
        });
        const url = await gateway.listen();
        const shownMarks = marks.startsWith('sqlite:') ? marks : gateway.marks.kind;
        process.stdout.write(
          `leasehold gateway listening on ${url} (upstream: ${new URL(upstream).origin}, marks: ${shownMarks})\n`,
        );
        return new Promise<number>((resolve) => {
          let stopping = false;
          const stop = (signal: NodeJS.Signals): void => {
            if (stopping) process.exit(128 + (signal === 'SIGINT' ? 2 : 15));
            stopping = true;
            process.stderr.write(`leasehold gateway: ${signal} received, shutting down\n`);
            gateway.close().then(
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
      }),
    );
}
