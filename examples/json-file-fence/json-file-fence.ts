// A third-party fence in front of a JSON file: the file holds the protected data and, in the
// same write, each scope's high-water mark. docs/fence-contract.md walks through it. One
// process per file: every check-and-write is synchronous, so nothing interleaves within it.
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { parseToken, type ClaimResult } from 'leasehold';

export type Policy = '>=' | '>';

export type WriteResult =
  | { status: 'applied' }
  | { status: 'duplicate' }
  | { status: 'stale_fence'; highWaterMark: bigint };

interface FileShape {
  /** Per scope: the mark (a decimal string) and whether a claim set it with no write since. */
  marks: Record<string, { mark: string; claimed: boolean }>;
  /** Applied idempotency keys, `scope token key`. */
  keys: string[];
  /** The protected data: values appended per scope. */
  data: Record<string, string[]>;
}

export class JsonFileFence {
  constructor(
    private readonly path: string,
    private readonly policy: Policy = '>=',
  ) {}

  /**
   * Appends `value` to the scope's data if `token` passes the scope's mark, and moves the mark,
   * in one durable file write. Throws leasehold's ERR_INVALID_ARGUMENT for a malformed token.
   */
  write(
    scope: string,
    token: bigint | string,
    value: string,
    idempotencyKey?: string,
  ): WriteResult {
    // parseToken: canonical decimal strings or bigints from 1 to 2^63-1, never JS numbers.
    const t = parseToken(token);
    const file = this.read();
    const key = `${scope} ${t} ${idempotencyKey}`;
    const m = this.markOf(file, scope);
    // A token below the mark is stale even when its key was applied before: the writer must
    // learn it lost, whether or not its key is still remembered.
    if (t < m.mark) return { status: 'stale_fence', highWaterMark: m.mark };
    if (idempotencyKey !== undefined && file.keys.includes(key)) return { status: 'duplicate' };
    if (!this.passes(t, m)) return { status: 'stale_fence', highWaterMark: m.mark };
    file.marks[scope] = { mark: (t > m.mark ? t : m.mark).toString(), claimed: false };
    if (idempotencyKey !== undefined) file.keys.push(key);
    (file.data[scope] ??= []).push(value);
    this.save(file);
    return { status: 'applied' };
  }

  /**
   * Claim before start: raises the mark to `token` with no data write, durably. Applied
   * exactly when a write at `token` would pass now; under '>' the token's one write still
   * passes afterwards.
   */
  claim(scope: string, token: bigint | string): ClaimResult {
    const t = parseToken(token);
    const file = this.read();
    const m = this.markOf(file, scope);
    if (!this.passes(t, m)) return { status: 'stale_fence', highWaterMark: m.mark };
    file.marks[scope] = { mark: t.toString(), claimed: t > m.mark || m.claimed };
    this.save(file);
    return { status: 'applied' };
  }

  /** The scope's data, in the order it was accepted. */
  data(scope: string): string[] {
    return this.read().data[scope] ?? [];
  }

  private passes(t: bigint, m: { mark: bigint; claimed: boolean }): boolean {
    // Under '>', the token a claim installed still gets its one write.
    return this.policy === '>=' ? t >= m.mark : t > m.mark || (t === m.mark && m.claimed);
  }

  private markOf(file: FileShape, scope: string): { mark: bigint; claimed: boolean } {
    const m = file.marks[scope];
    return m === undefined
      ? { mark: 0n, claimed: false }
      : { mark: BigInt(m.mark), claimed: m.claimed };
  }

  private read(): FileShape {
    try {
      return JSON.parse(readFileSync(this.path, 'utf8')) as FileShape;
    } catch (err) {
      if ((err as { code?: string }).code === 'ENOENT') return { marks: {}, keys: [], data: {} };
      throw err;
    }
  }

  /** Writes a new file, fsyncs it and renames it over the old one: all or nothing. */
  private save(file: FileShape): void {
    const tmp = `${this.path}.tmp`;
    const fd = openSync(tmp, 'w');
    try {
      writeSync(fd, JSON.stringify(file));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.path);
  }
}
