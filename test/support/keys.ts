import { randomBytes } from 'node:crypto';

/** A key no other test uses: tests share real stores, so isolation is by key prefix. */
export function uniqueKey(label: string): string {
  return `test/${label}/${process.pid}-${randomBytes(4).toString('hex')}`;
}
