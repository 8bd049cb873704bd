// The gateway benchmark's plain reverse proxy in a process of its own: the same proxy library
// as the gateway (@fastify/reply-from over an undici pool), no fencing. Run as
// `node plain-proxy-peer.js UPSTREAM_URL`; prints "plain proxy listening on URL" on stdout and
// stops on SIGTERM.
import replyFrom from '@fastify/reply-from';
import { fastify } from 'fastify';

const upstream = process.argv[2];
if (upstream === undefined) throw new Error('usage: plain-proxy-peer UPSTREAM_URL');

const app = fastify();
app.removeAllContentTypeParsers();
app.addContentTypeParser('*', (_req, payload, done) => done(null, payload));
// 128 connections: the gateway's default upstream pool.
await app.register(replyFrom, { base: upstream, undici: { connections: 128 } });
app.all('/*', (req, reply) => reply.from(req.url));
const url = await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(`plain proxy listening on ${url}\n`);
process.on('SIGTERM', () => {
  void app.close().then(() => process.exit(0));
});
