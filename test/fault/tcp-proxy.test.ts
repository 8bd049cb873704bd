import assert from 'node:assert/strict';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { after, afterEach, before, describe, it } from 'node:test';
import { TcpProxy } from '../support/tcp-proxy.js';
import { eventually } from '../support/time.js';

let echo: Server;
let port = 0;
const echoSockets = new Set<Socket>();

before(async () => {
  echo = createServer((s) => {
    echoSockets.add(s);
    s.on('close', () => echoSockets.delete(s));
    s.on('error', () => undefined);
    s.on('data', (c: Buffer) => s.write(c));
  });
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', () => resolve()));
  port = (echo.address() as { port: number }).port;
});
after(() => {
  for (const s of echoSockets) s.destroy();
  return new Promise<void>((resolve) => echo.close(() => resolve()));
});

const open: { proxy: TcpProxy; socket?: Socket }[] = [];

async function proxy(): Promise<TcpProxy> {
  const p = await TcpProxy.start({ host: '127.0.0.1', port });
  open.push({ proxy: p });
  return p;
}

afterEach(async () => {
  for (const o of open.splice(0)) await o.proxy.close();
});

async function client(p: TcpProxy): Promise<{ socket: Socket; received: () => string }> {
  const socket = connect(p.port, '127.0.0.1');
  let data = '';
  socket.on('data', (c: Buffer) => (data += c.toString()));
  socket.on('error', () => undefined);
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  return { socket, received: () => data };
}

describe('TCP proxy (self-test against an echo server)', () => {
  it('passes bytes both ways', async () => {
    const p = await proxy();
    const c = await client(p);
    c.socket.write('hello');
    await eventually('echo', () => (c.received() === 'hello' ? true : undefined));
    c.socket.destroy();
    await p.close();
  });

  it('holds one direction until released, then delivers in order (and twice with duplicate)', async () => {
    const p = await proxy();
    const c = await client(p);
    p.hold('up');
    c.socket.write('a');
    c.socket.write('b');
    await eventually('held', () => (p.heldBytes('up') === 2 ? true : undefined));
    assert.equal(c.received(), '');
    p.release('up', { duplicate: true });
    await eventually('released', () => (c.received().length === 4 ? true : undefined));
    assert.equal(c.received(), 'abab');
    c.socket.destroy();
    await p.close();
  });

  it('holds replies (down) while requests still reach the server', async () => {
    const p = await proxy();
    const c = await client(p);
    p.hold('down');
    c.socket.write('ping');
    await eventually('reply held', () => (p.heldBytes('down') === 4 ? true : undefined));
    assert.equal(p.forwarded.up, 4);
    assert.equal(c.received(), '');
    p.release('down');
    await eventually('reply', () => (c.received() === 'ping' ? true : undefined));
    c.socket.destroy();
    await p.close();
  });

  it('armAfterNext: the next request passes, its answer and everything after it are held', async () => {
    const p = await proxy();
    const c = await client(p);
    c.socket.write('a');
    await eventually('first echo', () => (c.received() === 'a' ? true : undefined));
    p.armAfterNext('up', 'down', 'hold');
    assert.equal(p.heldBytes('down'), 0);
    c.socket.write('req');
    await eventually('answer held', () => (p.heldBytes('down') === 3 ? true : undefined));
    assert.equal(p.forwarded.up, 4);
    c.socket.write('more');
    await eventually('later answer held too', () => (p.heldBytes('down') === 7 ? true : undefined));
    assert.equal(c.received(), 'a');
    p.release('down');
    await eventually('released', () => (c.received() === 'areqmore' ? true : undefined));
    c.socket.write('z');
    await eventually('passes again', () => (c.received() === 'areqmorez' ? true : undefined));
    c.socket.destroy();
    await p.close();
  });

  it('drops bytes in drop mode, and delays them in order in delay mode', async () => {
    const p = await proxy();
    const c = await client(p);
    p.drop('up');
    c.socket.write('lost');
    await eventually('dropped', () => (p.dropped.up === 4 ? true : undefined));
    p.pass('up');
    p.delay('down', 150);
    const sent = performance.now();
    c.socket.write('x');
    c.socket.write('y');
    await eventually('delayed', () => (c.received() === 'xy' ? true : undefined));
    assert.ok(performance.now() - sent >= 140);
    c.socket.destroy();
    await p.close();
  });

  it('severs every connection', async () => {
    const p = await proxy();
    const c = await client(p);
    await eventually('connected', () => (p.connections === 1 ? true : undefined));
    const closed = new Promise<void>((resolve) => c.socket.once('close', () => resolve()));
    p.sever();
    await closed;
    assert.equal(p.connections, 0);
    await p.close();
  });
});
