/** Writes `rows` under `head` as left-aligned columns two spaces apart, for a terminal. */
export function printTable(head: readonly string[], rows: readonly (readonly string[])[]): void {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  for (const r of [head, ...rows]) {
    const line = r
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
    process.stdout.write(`${line}\n`);
  }
}
