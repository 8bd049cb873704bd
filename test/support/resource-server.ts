import Database from 'better-sqlite3';
import { createServer, type Server } from 'node:net';
import { SqliteFence } from '../../src/fencing/sqlite.js';
import { INSERT_LOG, RESOURCE_SCHEMA, sharedNow, UPSERT_JOB } from '../../src/fault/protocol.js';

/** Rows in the resource's `job_log` at `path` (its database file), read from a connection of its own. */
export function logCount(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM job_log').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

/**
 * A protected resource reachable over TCP (one JSON object per line in each direction), for
 * fault tests that put a proxy between a worker and the resource. Each request
 * `{scope, value, token, opId, fenced, proc}` is applied through a {@link SqliteFence}
 * (fenced) or plainly (the control arm) and logged in `job_log`, in commit order.
 */
export class ResourceServer {
  private constructor(
    private readonly server: Server,
    private readonly db: Database.Database,
    readonly port: number,
  ) {}

  static async start(path: string): Promise<ResourceServer> {
    const db = new Database(path, { timeout: 5000 });
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.exec(RESOURCE_SCHEMA);
    const fence = new SqliteFence({ database: db });
    const upsert = db.prepare(UPSERT_JOB);
    const log = db.prepare(INSERT_LOG);
    const apply = (req: {
      scope: string;
      value: string;
      token: string;
      opId: string;
      fenced: boolean;
      proc: string;
    }): string => {
      const row = (action: string, hwm: string | null) => ({
        t: sharedNow(),
        proc: req.proc,
        op: req.opId,
        scope: req.scope,
        token: req.token,
        action,
        hwm,
      });
      const mutate = (): null => {
        upsert.run({ scope: req.scope, body: req.value, token: req.token });
        log.run(row('applied', null));
        return null;
      };
      if (!req.fenced) {
        db.transaction(mutate).immediate();
        return 'applied';
      }
      const r = fence.apply(req.scope, req.token, mutate, { opId: req.opId });
      if (r.status === 'stale_fence') log.run(row('rejected', r.highWaterMark.toString()));
      if (r.status === 'duplicate') log.run(row('duplicate', null));
      return r.status;
    };
    const server = createServer((socket) => {
      let buffer = '';
      socket.on('data', (c: Buffer) => {
        buffer += c.toString('utf8');
        for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          let status: string;
          try {
            status = apply(JSON.parse(line) as Parameters<typeof apply>[0]);
          } catch (err) {
            status = `error: ${String(err)}`;
          }
          if (!socket.destroyed) socket.write(`${JSON.stringify({ status })}\n`);
        }
      });
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    return new ResourceServer(server, db, address.port);
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.db.close();
  }
}
