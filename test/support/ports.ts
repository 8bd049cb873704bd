import { createServer } from 'node:net';

// Ports for child processes (redis-server, etcd, postgres, pgbouncer …) that must be told a
// port before they bind it. A port the kernel handed out for `listen(0)` comes from the
// ephemeral range (32768–60999 here), the same range every outgoing connection takes its
// local port from, so between our release and the child's bind another connection, or a
// test file running beside this one, can take it. Below that range only listeners that
// chose a port take one: pick at random there, and check it with a bind.
const LOW = 20_000;
const HIGH = 32_000;

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen({ port, host: '127.0.0.1', exclusive: true }, () => {
      srv.close(() => resolve(true));
    });
  });
}

/** A loopback TCP port free at the time of the call, outside the ephemeral range. */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = LOW + Math.floor(Math.random() * (HIGH - LOW));
    if (await canBind(port)) return port;
  }
  throw new Error(`no free loopback port found in ${LOW}–${HIGH} after 200 tries`);
}
