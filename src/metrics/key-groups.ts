import { invalidArgument } from '../core/errors.js';

/** The label value every group past the limit, and every unusable group name, is counted under. */
export const OTHER_KEY_GROUP = 'other';

/** The defaults of the key-group options of `leasehold/metrics` and `leasehold/otel`. */
export const KEY_GROUP_DEFAULTS = Object.freeze({ maxKeyGroups: 50, maxLength: 64 });

/** Options shared by the Prometheus collector and the OpenTelemetry instrumentation. */
export interface KeyGroupOptions {
  /**
   * Maps a lease key (or a fence scope) to a coarse group, added to every lease and fence
   * metric as the `key_group` label: for example `(key) => key.split('/')[0]` turns
   * `report/july` into `report`. Must return few distinct values; never return the key
   * itself. Defaults to none (no `key_group` label).
   */
  readonly keyGroup?: (key: string) => string;
  /**
   * How many distinct groups may appear; later ones are counted as `other`, so a careless
   * `keyGroup` cannot blow up the number of series. From 1 to 1000. Defaults to 50.
   */
  readonly maxKeyGroups?: number;
}

/**
 * Bounded label values for keys. Keys themselves are never labels (one series per key grows
 * without end); a group name is, and the number of names is capped here.
 */
export class KeyGroups {
  /** The group names handed out so far: the cap counts them. */
  private readonly seen = new Set<string>();
  private readonly fn: ((key: string) => string) | undefined;
  private readonly max: number;

  constructor(options: KeyGroupOptions) {
    const fn = options.keyGroup;
    if (fn !== undefined && typeof fn !== 'function')
      throw invalidArgument('keyGroup', 'must be a function from key to group name', fn);
    const max = options.maxKeyGroups ?? KEY_GROUP_DEFAULTS.maxKeyGroups;
    if (!Number.isInteger(max) || max < 1 || max > 1000)
      throw invalidArgument('maxKeyGroups', 'must be an integer from 1 to 1000', max);
    this.fn = fn;
    this.max = max;
  }

  /** Whether metrics carry a `key_group` label at all. */
  get enabled(): boolean {
    return this.fn !== undefined;
  }

  /** The group of `key`, or undefined when grouping is off. */
  of(key: string): string | undefined {
    if (this.fn === undefined) return undefined;
    let group: unknown;
    try {
      group = this.fn(key);
    } catch {
      // A throwing mapper must not cost the observation (event listeners swallow errors).
      return OTHER_KEY_GROUP;
    }
    if (typeof group !== 'string' || group === '' || group.length > KEY_GROUP_DEFAULTS.maxLength) {
      return OTHER_KEY_GROUP;
    }
    if (this.seen.has(group)) return group;
    if (this.seen.size >= this.max) return OTHER_KEY_GROUP;
    this.seen.add(group);
    return group;
  }
}
