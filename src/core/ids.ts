import { randomUUID, randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

/** A new lease id: a random UUID (122 random bits), unguessable and fit for a `uuid` column. */
export function newLeaseId(): string {
  return randomUUID();
}

/** The default owner id: `host/pid/random`, readable in holders' info and logs. */
export function defaultOwnerId(): string {
  return `${hostname()}/${process.pid}/${randomBytes(3).toString('hex')}`;
}

/** The part of a lease id that may appear in logs and observers' views. */
export function leaseIdPrefix(leaseId: string): string {
  return leaseId.slice(0, 8);
}
