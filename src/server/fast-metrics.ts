import type { Metric, Registry } from 'prom-client';

/** A label set: one string value per label name. */
export type LabelValues<L extends string> = Readonly<Record<L, string>>;

/** Options shared by {@link FastCounter} and {@link FastHistogram}. */
export interface FastMetricOptions<L extends string> {
  readonly name: string;
  readonly help: string;
  /** At least one: every series of these metrics has labels. */
  readonly labelNames: readonly L[];
  readonly registers: readonly Registry[];
}

/** One labelled series: resolved once, then counted into without any lookup. */
abstract class Series {
  /** Whether the series has been counted into since the last reset (then it is exported). */
  listed = false;

  constructor(
    readonly labels: Readonly<Record<string, string>>,
    /** Called on the first count after creation or reset. */
    protected readonly onFirstUse: (series: Series) => void,
  ) {}

  abstract clear(): void;
}

/**
 * What the metric kinds share: children by label values, resolved through one Map per label
 * (no label hashing or validation per count), and the series in the order they were first
 * counted into, which is the order prom-client exports its own series in.
 */
abstract class FastMetric<L extends string, S extends Series> {
  name: string;
  readonly help: string;
  readonly aggregator = 'sum';
  abstract readonly type: 'counter' | 'histogram';
  private readonly labelNames: readonly L[];
  private readonly children = new Map<string, unknown>();
  protected listed: S[] = [];

  constructor(options: FastMetricOptions<L>) {
    if (options.labelNames.length === 0) throw new Error(`${options.name}: needs label names`);
    this.name = options.name;
    this.help = options.help;
    this.labelNames = [...options.labelNames];
    // The registry reads name, help, type, aggregator and get()/getForPromString(), and calls
    // reset(): the members every prom-client metric has.
    for (const r of options.registers) r.registerMetric(this as unknown as Metric);
  }

  /** The series of one label set, made on first use and kept. Not exported until counted into. */
  child(labels: LabelValues<L>): S {
    const names = this.labelNames;
    const last = names.length - 1;
    let map = this.children;
    for (let i = 0; i < last; i++) {
      const value = labels[names[i]!];
      let next = map.get(value) as Map<string, unknown> | undefined;
      if (next === undefined) {
        next = new Map();
        map.set(value, next);
      }
      map = next;
    }
    const value = labels[names[last]!];
    let series = map.get(value) as S | undefined;
    if (series === undefined) {
      const own: Record<string, string> = {};
      for (const n of names) own[n] = labels[n];
      series = this.newSeries(Object.freeze(own), (s) => {
        s.listed = true;
        this.listed.push(s as S);
      });
      map.set(value, series);
    }
    return series;
  }

  /** Forgets every count (the registry's `resetMetrics()`); children stay valid. */
  reset(): void {
    for (const s of this.listed) {
      s.clear();
      s.listed = false;
    }
    this.listed = [];
  }

  protected abstract newSeries(
    labels: Readonly<Record<string, string>>,
    onFirstUse: (series: Series) => void,
  ): S;
}

/** One series of a {@link FastCounter}. */
export class CounterSeries extends Series {
  value = 0;

  /** Adds `value` (default 1): like prom-client, a negative or non-finite value throws. */
  inc(value = 1): void {
    if (!(value >= 0) || value === Infinity) badValue(value, 'a counter');
    this.value += value;
    if (!this.listed) this.onFirstUse(this);
  }

  clear(): void {
    this.value = 0;
  }
}

/**
 * A Prometheus counter with labels whose series are resolved once ({@link child}) and counted
 * into directly. It sits in a prom-client `Registry` like a prom-client `Counter` and exports
 * exactly what one would after the same increments (series in first-use order).
 */
export class FastCounter<L extends string> extends FastMetric<L, CounterSeries> {
  readonly type = 'counter';

  /** `child(labels).inc(value)`. */
  inc(labels: LabelValues<L>, value = 1): void {
    this.child(labels).inc(value);
  }

  /** What prom-client's `Counter.get()` answers. */
  get(): Promise<object> {
    return Promise.resolve({
      help: this.help,
      name: this.name,
      type: this.type,
      values: this.listed.map((s) => ({ value: s.value, labels: s.labels })),
      aggregator: this.aggregator,
    });
  }

  protected newSeries(
    labels: Readonly<Record<string, string>>,
    onFirstUse: (series: Series) => void,
  ): CounterSeries {
    return new CounterSeries(labels, onFirstUse);
  }
}

/** One series of a {@link FastHistogram}: a count per bucket (not cumulative), sum and count. */
export class HistogramSeries extends Series {
  sum = 0;
  count = 0;
  readonly counts: number[];

  constructor(
    labels: Readonly<Record<string, string>>,
    onFirstUse: (series: Series) => void,
    private readonly bounds: readonly number[],
  ) {
    super(labels, onFirstUse);
    this.counts = bounds.map(() => 0);
  }

  /** Counts `value` into the first bucket whose bound is at least it; non-finite throws. */
  observe(value: number): void {
    if (!Number.isFinite(value)) badValue(value, 'a histogram');
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    if (i < bounds.length) this.counts[i]!++;
    this.sum += value;
    this.count++;
    if (!this.listed) this.onFirstUse(this);
  }

  clear(): void {
    this.sum = 0;
    this.count = 0;
    this.counts.fill(0);
  }
}

/**
 * A Prometheus histogram with labels whose series are resolved once ({@link child}) and counted
 * into a fixed array of buckets, instead of prom-client's per-observation label checks, label
 * hashing and buckets keyed by the bound's decimal string. It sits in a prom-client `Registry`
 * like a prom-client `Histogram` with the same buckets and exports exactly what one would
 * after the same observations: series in first-use order, cumulative `_bucket` lines with
 * `le`, then `+Inf`, `_sum` and `_count`, sums added in observation order.
 */
export class FastHistogram<L extends string> extends FastMetric<L, HistogramSeries> {
  readonly type = 'histogram';
  private readonly bounds: readonly number[];

  constructor(options: FastMetricOptions<L> & { readonly buckets: readonly number[] }) {
    if ((options.labelNames as readonly string[]).includes('le')) {
      throw new Error('le is a reserved label keyword');
    }
    super(options);
    // In the given order, as prom-client keeps them: the first bound a value fits counts it.
    this.bounds = Object.freeze([...options.buckets]);
  }

  /** `child(labels).observe(value)`. */
  observe(labels: LabelValues<L>, value: number): void {
    this.child(labels).observe(value);
  }

  /** What prom-client's `Histogram.getForPromString()` answers (what the registry renders). */
  getForPromString(): Promise<object> {
    return Promise.resolve({
      name: this.name,
      help: this.help,
      type: this.type,
      values: this.exportValues(),
      aggregator: this.aggregator,
    });
  }

  /** What prom-client's `Histogram.get()` answers: each value's labels with the series' own. */
  get(): Promise<object> {
    const values = this.exportValues().map(({ labels, sharedLabels, ...rest }) => ({
      ...rest,
      labels: { ...labels, ...sharedLabels },
    }));
    return Promise.resolve({
      name: this.name,
      help: this.help,
      type: this.type,
      values,
      aggregator: this.aggregator,
    });
  }

  private exportValues(): ExportedValue[] {
    const bucket = `${this.name}_bucket`;
    const values: ExportedValue[] = [];
    for (const s of this.listed) {
      const shared = s.labels;
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += s.counts[i]!;
        values.push(pair({ le: this.bounds[i]! }, acc, bucket, null, shared));
      }
      values.push(pair({ le: '+Inf' }, s.count, bucket, null, shared));
      values.push(pair({}, s.sum, `${this.name}_sum`, undefined, shared));
      values.push(pair({}, s.count, `${this.name}_count`, undefined, shared));
    }
    return values;
  }

  protected newSeries(
    labels: Readonly<Record<string, string>>,
    onFirstUse: (series: Series) => void,
  ): HistogramSeries {
    return new HistogramSeries(labels, onFirstUse, this.bounds);
  }
}

interface ExportedValue {
  labels: Record<string, string | number>;
  sharedLabels: Readonly<Record<string, string>>;
  value: number;
  metricName: string;
  exemplar: null | undefined;
}

/** One exported line, shaped as prom-client's own histogram shapes it (the registry reads it). */
function pair(
  labels: Record<string, string | number>,
  value: number,
  metricName: string,
  exemplar: null | undefined,
  sharedLabels: Readonly<Record<string, string>>,
): ExportedValue {
  return { labels, sharedLabels, value, metricName, exemplar };
}

function badValue(value: number, what: string): never {
  throw new TypeError(`Value is not a valid number for ${what}: ${String(value)}`);
}
