import { constants } from 'node:fs';
import { mkdir, open, opendir, readFile, stat, unlink } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { invalidArgument } from '../../../core/errors.js';
import { parseHandle } from '../names.js';
import type { ListedObject, ObjectStore } from '../object-store.js';

/** Options for {@link DirectoryObjectStore}. */
export interface DirectoryObjectStoreOptions {
  /** The directory that holds the objects (created if missing). It belongs to the catalog. */
  readonly root: string;
}

/**
 * Objects as files under one local directory: `<root>/reports/july@41-…`. A put opens the
 * file with `O_CREAT | O_EXCL` (`'wx'`), so it never overwrites; then it fsyncs the file and
 * its directory (and any directory it had to create), so a staged object is on disk before
 * `stage()` returns and before any publish can name it.
 *
 * @example
 * const objects = new DirectoryObjectStore({ root: '/var/lib/reports/objects' });
 */
export class DirectoryObjectStore implements ObjectStore {
  readonly description: string;
  private readonly root: string;

  constructor(options: DirectoryObjectStoreOptions) {
    if (
      typeof options !== 'object' ||
      options === null ||
      typeof options.root !== 'string' ||
      options.root === ''
    ) {
      throw invalidArgument('root', 'must be a directory path', options?.root);
    }
    this.root = resolve(options.root);
    this.description = `directory:${this.root}`;
  }

  async put(key: string, body: AsyncIterable<Uint8Array>): Promise<void> {
    const path = this.pathOf(key);
    const dir = dirname(path);
    const created = await mkdir(dir, { recursive: true });
    const file = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o644);
    try {
      for await (const chunk of body) {
        let off = 0;
        while (off < chunk.byteLength) {
          const { bytesWritten } = await file.write(chunk, off, chunk.byteLength - off);
          off += bytesWritten;
        }
      }
      await file.sync();
    } finally {
      await file.close();
    }
    // The new entry is durable only once its directory is; new directories need their parents too.
    await fsyncDir(dir);
    if (created !== undefined) {
      const top = resolve(created);
      for (let d = dir; d.length > 1; d = dirname(d)) {
        await fsyncDir(dirname(d));
        if (d === top) break;
      }
    }
  }

  async get(key: string): Promise<Buffer | undefined> {
    try {
      return await readFile(this.pathOf(key));
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    const path = this.pathOf(key);
    try {
      await unlink(path);
    } catch (err) {
      if (isMissing(err)) return;
      throw err;
    }
    await fsyncDir(dirname(path));
  }

  async *list(): AsyncIterable<ListedObject> {
    const walk = async function* (dir: string, root: string): AsyncIterable<ListedObject> {
      let entries;
      try {
        entries = await opendir(dir);
      } catch (err) {
        if (isMissing(err)) return;
        throw err;
      }
      for await (const e of entries) {
        const path = join(dir, e.name);
        if (e.isDirectory()) {
          yield* walk(path, root);
        } else if (e.isFile()) {
          const st = await stat(path).catch(() => undefined);
          if (st === undefined) continue;
          yield {
            key: relative(root, path).split(sep).join('/'),
            size: st.size,
            modifiedAtMs: st.mtimeMs,
          };
        }
      }
    };
    yield* walk(this.root, this.root);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  /** Keys are handles: their names have no `.`/`..` segments, so the path stays under the root. */
  private pathOf(key: string): string {
    parseHandle(key, 'key');
    return join(this.root, ...key.split('/'));
  }
}

async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

function isMissing(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === 'ENOENT';
}
