import type { FastifyInstance } from 'fastify';
import type { Unwatch } from '../core/store.js';
import { validateKey, validatePrefix } from '../core/validate.js';
import { ANONYMOUS, mayRead, readablePrefixes } from '../http-service/auth.js';
import type { ServerContext } from './context.js';
import type { ServerEvent } from './event-hub.js';
import { ApiError } from './http-errors.js';
import { EVENTS_QUERY } from './schemas.js';

/** A stream that falls this far behind is closed rather than buffered without bound. */
const MAX_BUFFERED_BYTES = 1 << 20;
const HEARTBEAT_MS = 15_000;

/** Each event's SSE frame, serialised once however many streams it goes to. */
const frames = new WeakMap<ServerEvent, string>();

function frameOf(e: ServerEvent): string {
  let frame = frames.get(e);
  if (frame === undefined) {
    frame = `id: ${e.seq}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`;
    frames.set(e, frame);
  }
  return frame;
}

/**
 * Registers `GET /v1/events`: a server-sent event stream of lease events under `prefix` (or
 * for one exact `key`, which also relays the store's own change notifications as `changed`).
 * The first event is `ready`, sent once the subscription is live, so a client that re-checks
 * after it cannot miss a change. A token restricted to some prefixes sees only those keys.
 */
export function registerEventRoutes(app: FastifyInstance, ctx: ServerContext): void {
  app.get(
    '/v1/events',
    { schema: { querystring: EVENTS_QUERY }, config: { auth: true } },
    async (req, reply) => {
      const q = req.query as { prefix?: string; key?: string };
      const principal = req.principal ?? ANONYMOUS;
      let key: string | undefined;
      let prefix = '';
      if (q.key !== undefined) {
        key = validateKey(q.key, 'key');
        if (!mayRead(principal, key)) {
          throw new ApiError(
            'permission_denied',
            `token ${principal.name} may not read ${JSON.stringify(key)}`,
          );
        }
      } else {
        prefix = validatePrefix(q.prefix ?? '', 'prefix');
        readablePrefixes(principal, prefix); // throws 403 when nothing under prefix is readable
      }
      if (ctx.shutdown.aborted) throw new ApiError('unavailable', 'the server is shutting down');
      // HEAD gets a stream's headers and the end at once: Node sends a HEAD answer's headers
      // only when it ends, and a stream never ends by itself.
      if (req.method === 'HEAD') {
        return reply
          .type('text/event-stream; charset=utf-8')
          .header('cache-control', 'no-store')
          .send();
      }
      let unwatch: Unwatch | undefined;
      // Assigned once the stream is open; a notification before that has nobody to tell.
      let onStoreChange = (): void => {};
      if (key !== undefined) {
        // Subscribe at the store before answering, so that `ready` means "live".
        // An observer: every stream relays every change, whoever else in this process waits.
        unwatch = await ctx.store.watch(key, () => onStoreChange(), { observer: true });
      }
      reply.hijack();
      const res = reply.raw;
      if (res.destroyed) {
        unwatch?.(); // the client left while we subscribed
        return;
      }
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-store',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      ctx.streams.add(res);
      ctx.metrics.sseClients.inc();
      let closed = false;
      const write = (chunk: string): void => {
        if (closed) return;
        res.write(chunk);
        if (res.writableLength > MAX_BUFFERED_BYTES) res.destroy();
      };
      // The holder's token this stream last told of (by `acquired` or `changed`).
      let toldToken: string | undefined;
      const send = (e: ServerEvent): void => {
        if (e.type === 'acquired' || (e.type === 'changed' && e.token !== undefined))
          toldToken = e.token;
        write(frameOf(e));
      };
      let changePending = false;
      // Store notifications may be coarse (SQLite sees every commit to the file, on any key),
      // and each one would send every waiter back to re-check. Relay one only when the key is
      // actually free now, or when it has a holder this stream has not told of (a grant made
      // through another server or process: `changed` with the holder's token, which wakes
      // observers, not waiters); a failed read relays it anyway (a spurious wake-up is allowed).
      const changed = (): void => {
        if (changePending || key === undefined) return;
        changePending = true;
        setImmediate(() => {
          changePending = false;
          if (closed) return;
          ctx.store.inspect(key, ctx.storeOptions).then(
            (state) => {
              const h = state.holder;
              if (h === undefined) send(ctx.hub.stamp({ type: 'changed', key }));
              else if (h.token.toString() !== toldToken) {
                send(ctx.hub.stamp({ type: 'changed', key, token: h.token.toString() }));
              }
            },
            () => send(ctx.hub.stamp({ type: 'changed', key })),
          );
        });
      };
      onStoreChange = changed;
      const unsubscribe = ctx.hub.subscribe(
        key !== undefined ? { key } : { prefix, allow: (k) => mayRead(principal, k) },
        send,
      );
      const heartbeat = setInterval(() => write(': ping\n\n'), HEARTBEAT_MS);
      heartbeat.unref();
      res.once('close', () => {
        closed = true;
        clearInterval(heartbeat);
        unsubscribe();
        unwatch?.();
        ctx.streams.delete(res);
        ctx.metrics.sseClients.dec();
      });
      write('retry: 1000\n\n');
      write(
        `event: ready\ndata: ${JSON.stringify({ key: key ?? null, prefix: key === undefined ? prefix : null })}\n\n`,
      );
    },
  );
}
