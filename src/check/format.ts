import type { CheckReport, InvariantId, InvariantReport } from './report.js';

/** The p-th percentile (0–100) of `values`, or undefined when empty (nearest-rank). */
export function percentile(values: readonly number[], p: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

/** A one-line summary of figures, the form every run prints. */
export function formatFigures(f: {
  runs: number;
  grants: number;
  handOffs?: number;
  localSuccessions?: number;
  fencedWritesAttempted: number;
  staleWritesRejected: number;
  staleWritesAccepted: number;
  i3Overlaps: number;
  takeoverMs: readonly number[];
}): string {
  const p50 = percentile(f.takeoverMs, 50);
  const p99 = percentile(f.takeoverMs, 99);
  const ms = (v: number | undefined) => (v === undefined ? 'n/a' : `${Math.round(v)}ms`);
  return [
    `runs=${f.runs}`,
    `grants=${f.grants}`,
    ...(f.handOffs === undefined ? [] : [`hand_offs=${f.handOffs}`]),
    ...(f.localSuccessions === undefined ? [] : [`local_successions=${f.localSuccessions}`]),
    `fenced_writes_attempted=${f.fencedWritesAttempted}`,
    `stale_writes_rejected=${f.staleWritesRejected}`,
    `stale_writes_accepted=${f.staleWritesAccepted}`,
    `i3_overlaps=${f.i3Overlaps}`,
    `takeover_p50=${ms(p50)}`,
    `takeover_p99=${ms(p99)}`,
  ].join(' ');
}

/** The checker's verdict as text: one line per invariant, counterexamples, figures, verdict. */
export function formatReport(report: CheckReport): string {
  const lines: string[] = [];
  for (const [id, r] of Object.entries(report.invariants) as [InvariantId, InvariantReport][]) {
    const count = r.violations.length;
    const head =
      r.status === 'ok'
        ? `ok${id === 'I5' && r.note ? ` (${r.note})` : ''}`
        : r.status === 'not_checked'
          ? `not checked${r.note ? ` (${r.note})` : ''}`
          : r.status === 'unknown'
            ? `UNKNOWN${r.note ? ` (${r.note})` : ''}`
            : `${r.status === 'expected' ? 'EXPECTED' : 'VIOLATED'}: ${count}${count >= 5 ? '+' : ''} counterexample(s)${r.note ? ` (${r.note})` : ''}`;
    lines.push(`${id} ${INVARIANT_NAMES[id]}: ${head}`);
    for (const v of r.violations) {
      lines.push(`  - ${v.message}`);
      for (const e of v.events) lines.push(`      ${JSON.stringify(e)}`);
    }
  }
  const f = report.figures;
  lines.push(
    `figures: events=${report.events} ${formatFigures({ ...f, runs: 1 })} lost_acknowledged_writes=${f.lostAcknowledgedWrites} min_slack=${f.minSlackMs === undefined ? 'n/a' : `${Math.round(f.minSlackMs)}ms`}`,
  );
  const unknown = Object.entries(report.invariants)
    .filter(([, r]) => r.status === 'unknown')
    .map(([id]) => id);
  lines.push(
    report.valid
      ? `verdict: VALID — no safety invariant violated${unknown.length > 0 ? ` (${unknown.join(', ')} unknown: search budget exceeded)` : ''}`
      : `verdict: INVALID — ${Object.entries(report.invariants)
          .filter(([, r]) => r.status === 'violated')
          .map(([id]) => id)
          .join(', ')} violated`,
  );
  return lines.join('\n');
}

const INVARIANT_NAMES: Record<InvariantId, string> = {
  I1: 'resource fencing',
  I2: 'token order and uniqueness',
  I3: 'store-clock exclusivity',
  I4: 'conservative client deadline',
  I5: 'linearizable acquire/renew/release',
  I6: 'no lost acknowledged writes',
  I7: 'release/renew safety',
  I8: 'liveness bound',
  I9: 'first write fenced (claim before start)',
  I10: 'semaphore limit',
  I11: 'sets held whole',
  I12: 'lock-delay honoured',
};
