import { nodeProcess } from './platform.js';

/** A new lease id: a random UUID (122 random bits), unguessable and fit for a `uuid` column. */
export function newLeaseId(): string {
  // Web Crypto: a global in Node 20 and in browsers, so the core also runs in the lesson page.
  return globalThis.crypto.randomUUID();
}

/** The default owner id: `host/pid/random`, readable in holders' info and logs. */
export function defaultOwnerId(): string {
  const random = Array.from(globalThis.crypto.getRandomValues(new Uint8Array(3)), (b) =>
    b.toString(16).padStart(2, '0'),
  ).join('');
  const proc = nodeProcess();
  const host = proc?.getBuiltinModule('node:os').hostname() ?? 'browser';
  return `${host}/${proc?.pid ?? 0}/${random}`;
}

/** The part of a lease id that may appear in logs and observers' views. */
export function leaseIdPrefix(leaseId: string): string {
  return leaseId.slice(0, 8);
}
