import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';

/** Starts `app` listening; its URL as clients reach it (`http(s)://host:port`, IPv6 in brackets). */
export async function listenAt(
  app: FastifyInstance,
  host: string,
  port: number,
  tls: boolean,
): Promise<string> {
  await app.listen({ host, port });
  const addr = app.server.address() as AddressInfo;
  const h = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return `${tls ? 'https' : 'http'}://${h}:${addr.port}`;
}

/**
 * Closes `app`, answering the requests in flight. Keep-alive connections that go idle after
 * their last answer would hold the close open until their keep-alive timeout: they are closed
 * as they go idle, and whatever is still open after `cutAfterMs` is cut.
 */
export async function closeGracefully(app: FastifyInstance, cutAfterMs = 10_000): Promise<void> {
  const reap = setInterval(() => app.server.closeIdleConnections(), 50);
  const cut = setTimeout(() => app.server.closeAllConnections(), cutAfterMs);
  try {
    await app.close();
  } finally {
    clearInterval(reap);
    clearTimeout(cut);
  }
}
