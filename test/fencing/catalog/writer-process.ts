/**
 * A report writer process for the catalog's real-process stories (forked by
 * catalog-story.ts): a real LeaseClient on the SQLite lease store, and a Catalog on the
 * shared pointer store and directory. It does exactly what the parent asks over IPC, so the
 * parent can put real signals (SIGSTOP, SIGCONT, SIGKILL) at exact points of its work.
 *
 * Config (LEASEHOLD_CATALOG_WRITER, JSON): leasePath, pointers, root, plainPath.
 */
import Database from 'better-sqlite3';
import { LeaseClient } from '../../../src/core/client.js';
import { isLeaseholdError } from '../../../src/core/errors.js';
import type { Lease } from '../../../src/core/lease.js';
import { Catalog } from '../../../src/fencing/catalog/catalog.js';
import { DirectoryObjectStore } from '../../../src/fencing/catalog/objects/directory.js';
import type { CatalogLease } from '../../../src/fencing/catalog/results.js';
import { SqliteLeaseStore } from '../../../src/stores/sqlite/store.js';
import { openPointers, type PointerConfig } from './pointers.js';

/** How a writer process is set up. */
export interface WriterConfig {
  leasePath: string;
  pointers: PointerConfig;
  root: string;
  /** SQLite file of the control arm's plain pointer. */
  plainPath: string;
}

/** What the parent asks. `stop` points: where the writer stops itself with SIGSTOP. */
export type WriterRequest = { id: number } & (
  | {
      cmd: 'acquire';
      key: string;
      ttlMs: number;
      waitMs: number;
      /** Claim before start: the lease is handed over only once the catalog claimed its token on this name. */
      claimName?: string;
    }
  | { cmd: 'stage'; name: string; body: string; stopAfterRegister?: boolean }
  | {
      cmd: 'publish';
      name: string;
      handle: string;
      /** Stop right after the local lease check, before the pointer transaction. */
      stopAfterCheck?: boolean;
      /** The control arm: a plain pointer overwrite, no fence (after the same lease check). */
      unfenced?: boolean;
      /** Stop inside the publish transaction, after the pointer moved, before COMMIT (SQLite). */
      stopInTransaction?: boolean;
    }
  | { cmd: 'exit' }
);

const config = JSON.parse(process.env['LEASEHOLD_CATALOG_WRITER'] ?? '{}') as WriterConfig;
let stopInTransaction = false;
const client = new LeaseClient({ store: new SqliteLeaseStore({ path: config.leasePath }) });
const objects = new DirectoryObjectStore({ root: config.root });
const catalog = new Catalog({
  // SQLite only: a PostgreSQL publish is one message, held on the server by the test instead.
  pointers:
    config.pointers.kind === 'sqlite'
      ? openPointers(config.pointers, () => {
          if (stopInTransaction) process.kill(process.pid, 'SIGSTOP');
        })
      : openPointers(config.pointers),
  objects,
});
const plain = new Database(config.plainPath, { timeout: 5000 });
plain.exec(
  'CREATE TABLE IF NOT EXISTS plain_pointer (name TEXT PRIMARY KEY, handle TEXT NOT NULL)',
);
const overwrite = plain.prepare(
  'INSERT INTO plain_pointer (name, handle) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET handle = excluded.handle',
);
let lease: Lease | undefined;

/** The lease as the catalog sees it; `stopAfterCheck` stops the process right after its check. */
function capability(l: Lease, stopAfterCheck: boolean): CatalogLease {
  return {
    key: l.key,
    leaseId: l.leaseId,
    token: l.token,
    remainingMs: () => {
      const left = l.remainingMs();
      // Delivered before kill() returns: nothing more of this process runs until SIGCONT.
      if (stopAfterCheck) process.kill(process.pid, 'SIGSTOP');
      return left;
    },
  };
}

async function handle(req: WriterRequest): Promise<Record<string, unknown>> {
  switch (req.cmd) {
    case 'acquire': {
      const r = await client.acquire(req.key, {
        ttl: req.ttlMs,
        wait: req.waitMs,
        ...(req.claimName === undefined
          ? {}
          : { fences: [{ fence: catalog, scope: req.claimName }] }),
      });
      if (r.status !== 'acquired') return { status: r.status };
      lease = r.lease;
      return { status: 'acquired', token: lease.token.toString(), leaseId: lease.leaseId };
    }
    case 'stage': {
      if (lease === undefined) return { status: 'no_lease' };
      const body = req.body;
      const stop = req.stopAfterRegister === true;
      // A stream: the registry row is written before the first chunk is asked for.
      const data = (async function* () {
        await Promise.resolve();
        if (stop) process.kill(process.pid, 'SIGSTOP');
        yield Buffer.from(body);
      })();
      // The real Lease, as applications pass it.
      const s = await catalog.stage(lease, req.name, data);
      return { status: 'staged', handle: s.handle };
    }
    case 'publish': {
      if (lease === undefined) return { status: 'no_lease' };
      const cap = capability(lease, req.stopAfterCheck === true);
      try {
        if (req.unfenced === true) {
          if (!(cap.remainingMs() > 0)) return { status: 'lease_lost' };
          overwrite.run(req.name, req.handle);
          return { status: 'overwritten' };
        }
        stopInTransaction = req.stopInTransaction === true;
        const r = await catalog.publish(cap, req.name, req.handle);
        return {
          ...r,
          highWaterMark: 'highWaterMark' in r ? r.highWaterMark.toString() : undefined,
        };
      } catch (err) {
        if (isLeaseholdError(err)) return { status: 'error', code: err.code, message: err.message };
        throw err;
      }
    }
    case 'exit':
      await catalog.close();
      plain.close();
      await client.close();
      setImmediate(() => process.exit(0));
      return { status: 'bye' };
  }
}

process.on('message', (msg: WriterRequest) => {
  handle(msg).then(
    (reply) => process.send?.({ id: msg.id, reply }),
    (err: unknown) =>
      process.send?.({ id: msg.id, reply: { status: 'crash', message: String(err) } }),
  );
});
process.send?.({ ready: true });
