import type { ClientEvent, FaultEvent } from '../history/events.js';
import { I3_EXPECTED_FAULTS, I4_EXPECTED_FAULTS } from './expected-faults.js';
import { endOf, type Grant } from './grants.js';
import { status, violation, type InvariantStatus, type Violation } from './report.js';

/**
 * I11: a set of keys taken as one (`acquireAll`) was, at some instant of the store's clock,
 * wholly held by its acquisition — never half-held. For each set the client reported held
 * (its members' `acquire ok` events share a `set` label and list `setKeys`), every key of the
 * set has a member whose store grant is still valid when the last member was granted. A key
 * of the set with no grant of its own means another owner may hold it while this one believes
 * it holds the set. Expected to fail where the client's deadline may outrun the store's expiry
 * (the faults of I4, for that process) and under the store faults of I3.
 */
export function checkI11(
  grants: readonly Grant[],
  client: readonly ClientEvent[],
  faults: readonly FaultEvent[],
  tolerance: number,
): { status: InvariantStatus; violations: Violation[]; note?: string } {
  const sets = new Map<string, ClientEvent[]>();
  for (const e of client) {
    if (e.type !== 'acquire' || e.phase !== 'ok' || e.set === undefined) continue;
    const list = sets.get(e.set) ?? [];
    list.push(e);
    sets.set(e.set, list);
  }
  if (sets.size === 0) return { status: 'not_checked', violations: [], note: 'no sets of keys' };
  const byLease = new Map<string, Grant>();
  for (const g of grants) byLease.set(`${g.key}\u0000${g.lease}\u0000${g.token}`, g);
  const globalExpected = faults.some((f) => I3_EXPECTED_FAULTS.has(f.fault));
  const expectedProcs = new Set(
    faults.filter((f) => I4_EXPECTED_FAULTS.has(f.fault) && f.proc).map((f) => f.proc!),
  );
  const violations: Violation[] = [];
  let unexpected = 0;
  for (const [label, members] of sets) {
    const first = members[0]!;
    const found: { e: ClientEvent; g: Grant }[] = [];
    const problems: string[] = [];
    for (const key of first.setKeys ?? []) {
      const e = members.find((m) => m.key === key);
      const g = e && byLease.get(`${key}\u0000${e.lease ?? e.token}\u0000${e.token}`);
      if (e === undefined) problems.push(`${key} was never granted to it`);
      else if (g !== undefined) found.push({ e, g });
    }
    const lastGrant = Math.max(...found.map((f) => f.g.grantedAt));
    for (const { g } of found) {
      if (endOf(g) + tolerance < lastGrant)
        problems.push(
          `${g.key} (token ${g.token}) ended at ${endOf(g)}, before the last member was granted at ${lastGrant}`,
        );
    }
    if (problems.length === 0) continue;
    if (!globalExpected && !expectedProcs.has(first.proc)) unexpected++;
    violations.push(
      violation(
        'I11',
        `set ${label} of ${first.proc} [${(first.setKeys ?? []).join(', ')}] was reported held but never wholly held: ${problems.join('; ')}`,
        ...members,
        ...found.map((f) => f.g.event),
      ),
    );
  }
  const excused = violations.length > 0 && unexpected === 0;
  return {
    status: status(violations, excused),
    violations,
    ...(excused ? { note: 'expected under a client or store clock fault' } : {}),
  };
}
