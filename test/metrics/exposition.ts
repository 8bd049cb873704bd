/** One sample of a Prometheus text exposition. */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** Parses the text prom-client's `registry.metrics()` renders (no escapes in our label values). */
export function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null) throw new Error(`unparsable exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (m[2] ?? '').matchAll(/([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"/g)) {
      labels[pair[1]!] = pair[2]!;
    }
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

/**
 * The value of the sample `name` whose labels are exactly `labels` (histograms: pass `le` for
 * a bucket), or 0 when the series does not exist yet — a counter nobody incremented.
 */
export function valueOf(
  samples: readonly Sample[],
  name: string,
  labels: Readonly<Record<string, string>> = {},
): number {
  const want = Object.entries(labels);
  const found = samples.find(
    (s) =>
      s.name === name &&
      Object.keys(s.labels).length === want.length &&
      want.every(([k, v]) => s.labels[k] === v),
  );
  return found?.value ?? 0;
}
