/** The faults the lesson can put A through; see `LessonOptions.fault` in lesson.ts. */
export type LessonFault = 'pause' | 'delayed_request' | 'lost_renewal';

/** Every {@link LessonFault}, in the order the lesson page lists them. */
export const LESSON_FAULTS: readonly LessonFault[] = Object.freeze([
  'pause',
  'delayed_request',
  'lost_renewal',
]);

/** A named starting point of the lesson page; `fencing` is left as the reader set it. */
export interface LessonPreset {
  readonly id: string;
  readonly label: string;
  readonly options: {
    readonly fault: LessonFault;
    readonly pauseMs: number;
    readonly freezeAtMs: number;
    readonly ttlMs: number;
    readonly renewEveryMs: number;
  };
}

/** The lesson page's four presets. */
export const LESSON_PRESETS: readonly LessonPreset[] = Object.freeze([
  {
    id: 'pause_shorter',
    label: 'Pause shorter than the lease',
    options: {
      fault: 'pause',
      pauseMs: 5_000,
      freezeAtMs: 2_000,
      ttlMs: 10_000,
      renewEveryMs: 3_000,
    },
  },
  {
    id: 'pause_past',
    label: 'Pause past the lease',
    options: {
      fault: 'pause',
      pauseMs: 12_000,
      freezeAtMs: 2_000,
      ttlMs: 10_000,
      renewEveryMs: 3_000,
    },
  },
  {
    id: 'delayed_request',
    label: 'Delayed request',
    options: {
      fault: 'delayed_request',
      pauseMs: 12_000,
      freezeAtMs: 2_000,
      ttlMs: 10_000,
      renewEveryMs: 3_000,
    },
  },
  {
    id: 'lost_renewal',
    label: 'Lost renewal answer',
    options: {
      fault: 'lost_renewal',
      pauseMs: 12_000,
      freezeAtMs: 2_000,
      ttlMs: 10_000,
      renewEveryMs: 3_000,
    },
  },
] satisfies LessonPreset[]);
