import type * as FastifyModule from 'fastify';
import type * as PinoModule from 'pino';
import type * as PromClient from 'prom-client';
import { checkPeers, requirePeer } from '../core/runtime/peer-packages.js';

// Loaded when the server is first imported. Without one of them that import fails with one
// error naming every missing package and the command that installs them (decision 012).
const USED_BY = 'leasehold/server';
checkPeers(['fastify', 'pino', 'prom-client'], USED_BY);

/** Fastify, the server's HTTP framework. */
export const fastifyModule = requirePeer<typeof FastifyModule>('fastify', USED_BY);
/** pino, the server's logger. */
export const pinoModule = requirePeer<typeof PinoModule>('pino', USED_BY);
/** prom-client, the server's metrics. */
export const promClient = requirePeer<typeof PromClient>('prom-client', USED_BY);
