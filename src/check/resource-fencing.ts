import type { ResourceEvent } from '../history/events.js';
import { status, violation, type InvariantStatus, type Violation } from './report.js';

export function checkI1(resource: ResourceEvent[]): {
  status: InvariantStatus;
  violations: Violation[];
} {
  const violations: Violation[] = [];
  const top = new Map<string, { token: bigint; event: ResourceEvent }>();
  for (const e of resource) {
    if (e.action !== 'applied') continue;
    const token = BigInt(e.token);
    const prev = top.get(e.resource);
    if (prev !== undefined && token < prev.token) {
      violations.push(
        violation(
          'I1',
          `resource ${e.resource} applied token ${token} after token ${prev.token}`,
          prev.event,
          e,
        ),
      );
    } else {
      top.set(e.resource, { token, event: e });
    }
  }
  return { status: status(violations), violations };
}
