import { createServer, connect, type Server, type Socket } from 'node:net';

/** `up`: client → server bytes; `down`: server → client bytes. */
export type ProxyDirection = 'up' | 'down';

/** What the proxy does with one direction's bytes. */
export type ProxyMode = 'pass' | 'hold' | 'drop';

interface Pipe {
  readonly client: Socket;
  readonly server: Socket;
  readonly held: Record<ProxyDirection, Buffer[]>;
  /** Time the last delayed chunk per direction goes out, so delays keep byte order. */
  readonly lastDue: Record<ProxyDirection, number>;
  /** The client closed while its requests were held and {@link TcpProxy.keepHeldRequests} is on. */
  clientGone: boolean;
}

/**
 * A TCP proxy for fault tests, controlled per direction: pass, hold (buffer until
 * {@link release}), drop (discard), delay (each chunk waits, order kept), and sever (reset
 * every connection). Listens on 127.0.0.1 on a free port.
 *
 * @example
 * const proxy = await TcpProxy.start({ host: '127.0.0.1', port: 6379 });
 * proxy.hold('down');            // replies stop reaching the client
 * proxy.release('down');         // …and arrive now, in order
 */
export class TcpProxy {
  private readonly pipes = new Set<Pipe>();
  private readonly mode: Record<ProxyDirection, ProxyMode> = { up: 'pass', down: 'pass' };
  private readonly delayMs: Record<ProxyDirection, number> = { up: 0, down: 0 };
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();
  /** Switches armed by {@link armAfterNext}: applied once the trigger direction forwards bytes. */
  private armed: { trigger: ProxyDirection; target: ProxyDirection; mode: ProxyMode }[] = [];
  /** Bytes forwarded per direction, for tests that wait until a request has gone through. */
  readonly forwarded: Record<ProxyDirection, number> = { up: 0, down: 0 };
  /** Bytes discarded per direction in drop mode. */
  readonly dropped: Record<ProxyDirection, number> = { up: 0, down: 0 };
  /** See {@link keepHeldRequests}. */
  private keepHeldUp = false;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private target: { host: string; port: number },
  ) {}

  /**
   * Starts a proxy in front of `target`, on `listenPort` (a free one by default: a test that
   * starts a store late at an address it has already given out takes one from freePort()).
   */
  static async start(target: { host: string; port: number }, listenPort = 0): Promise<TcpProxy> {
    const ref: { proxy?: TcpProxy } = {};
    const server = createServer((client) => ref.proxy!.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(listenPort, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('proxy has no port');
    ref.proxy = new TcpProxy(server, address.port, target);
    return ref.proxy;
  }

  /** Buffers `dir`'s bytes until {@link release}. */
  hold(dir: ProxyDirection): void {
    this.mode[dir] = 'hold';
  }

  /** Discards `dir`'s bytes (a black hole) until {@link pass}. */
  drop(dir: ProxyDirection): void {
    this.mode[dir] = 'drop';
  }

  /** Forwards `dir`'s bytes normally again (held bytes stay held until {@link release}). */
  pass(dir: ProxyDirection): void {
    this.mode[dir] = 'pass';
  }

  /** Delays each chunk of `dir` by `ms` (0 turns delay off). */
  delay(dir: ProxyDirection, ms: number): void {
    this.delayMs[dir] = ms;
  }

  /**
   * Lets held client→server bytes outlive their sender: when a client closes (or is killed)
   * while its requests are held, the server side stays open, and {@link release} delivers the
   * requests and then ends it. A write already in the network when its sender died (F22's
   * control arm) arrives like this.
   */
  keepHeldRequests(): void {
    this.keepHeldUp = true;
  }

  /**
   * After the next chunk of `trigger` is forwarded (over any connection), switches `target`
   * to `mode`. `armAfterNext('up', 'down', 'hold')` lets the next request reach the server
   * and holds everything the server sends from then on — its answer included: a request
   * applied whose reply is lost (F5). Unlike a switch made by the test after it sent the
   * request, nothing can slip through in between.
   */
  armAfterNext(trigger: ProxyDirection, target: ProxyDirection, mode: ProxyMode): void {
    this.armed.push({ trigger, target, mode });
  }

  /**
   * Delivers every held chunk of `dir` in order (twice each with `duplicate`, as a network
   * that re-sends a request would) and switches `dir` back to pass.
   */
  release(dir: ProxyDirection, options: { duplicate?: boolean } = {}): void {
    this.mode[dir] = 'pass';
    for (const pipe of this.pipes) {
      const chunks = pipe.held[dir];
      pipe.held[dir] = [];
      const to = dir === 'up' ? pipe.server : pipe.client;
      for (const c of chunks) this.write(to, dir, c);
      if (options.duplicate === true) for (const c of chunks) this.write(to, dir, c);
      // The sender is gone: nothing more will come, so end the server side once delivered.
      if (dir === 'up' && pipe.clientGone) pipe.server.end();
    }
  }

  /** Bytes currently held for `dir`, over all connections. */
  heldBytes(dir: ProxyDirection): number {
    let n = 0;
    for (const p of this.pipes) for (const c of p.held[dir]) n += c.length;
    return n;
  }

  /** Resets every open connection (both sides see ECONNRESET or a close). */
  sever(): void {
    for (const p of this.pipes) {
      resetOrDestroy(p.client);
      resetOrDestroy(p.server);
    }
    this.pipes.clear();
  }

  /**
   * Sends new connections to `target` from now on and resets the open ones: a service address
   * that moves to another server (a failover behind a virtual IP or a DNS name).
   */
  retarget(target: { host: string; port: number }): void {
    this.target = target;
    this.sever();
  }

  /** Open connections. */
  get connections(): number {
    return this.pipes.size;
  }

  /** Severs everything and stops listening. */
  async close(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.sever();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    const server = connect(this.target.port, this.target.host);
    const pipe: Pipe = {
      client,
      server,
      held: { up: [], down: [] },
      lastDue: { up: 0, down: 0 },
      clientGone: false,
    };
    this.pipes.add(pipe);
    const end = (): void => {
      if (!this.pipes.delete(pipe)) return;
      client.destroy();
      server.destroy();
    };
    const clientEnd = (): void => {
      if (this.keepHeldUp && pipe.held.up.length > 0) {
        pipe.clientGone = true;
        return;
      }
      end();
    };
    client.on('data', (c: Buffer) => this.route(pipe, 'up', c));
    server.on('data', (c: Buffer) => this.route(pipe, 'down', c));
    client.on('error', clientEnd);
    client.on('close', clientEnd);
    server.on('error', end);
    server.on('close', end);
  }

  private route(pipe: Pipe, dir: ProxyDirection, chunk: Buffer): void {
    const mode = this.mode[dir];
    if (mode === 'drop') {
      this.dropped[dir] += chunk.length;
      return;
    }
    if (mode === 'hold') {
      pipe.held[dir].push(chunk);
      return;
    }
    const to = dir === 'up' ? pipe.server : pipe.client;
    const ms = this.delayMs[dir];
    if (ms <= 0 && pipe.lastDue[dir] <= Date.now()) {
      this.write(to, dir, chunk);
      return;
    }
    const due = Math.max(Date.now() + ms, pipe.lastDue[dir]);
    pipe.lastDue[dir] = due;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.write(to, dir, chunk);
    }, due - Date.now());
    this.timers.add(timer);
  }

  private write(to: Socket, dir: ProxyDirection, chunk: Buffer): void {
    if (to.destroyed) return;
    this.forwarded[dir] += chunk.length;
    to.write(chunk);
    if (this.armed.length === 0) return;
    // Switched after this chunk is handed to the socket and before any answer to it can be
    // read (that needs another turn of the event loop), so the answer meets the new mode.
    const fire = this.armed.filter((a) => a.trigger === dir);
    if (fire.length === 0) return;
    this.armed = this.armed.filter((a) => a.trigger !== dir);
    for (const a of fire) this.mode[a.target] = a.mode;
  }
}

/**
 * Resets `socket` (RST), or just destroys it once its own FIN is under way. On a socket whose
 * peer closed first, Node has already ended our side; libuv refuses to reset a socket while
 * its shutdown is in flight (EINVAL), and Node 20 then never closes the native handle — the
 * process spins at exit (`Environment::CleanupHandles`). Seen in F4: a killed worker's
 * connections, severed by the proxy's close. Such a socket is closing anyway.
 */
function resetOrDestroy(socket: Socket): void {
  if (socket.destroyed) return;
  if (socket.writableEnded) socket.destroy();
  else socket.resetAndDestroy();
}
