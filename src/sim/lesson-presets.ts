/** The faults the lesson can put A through; see `LessonOptions.fault` in lesson.ts. */
export type LessonFault = 'pause' | 'delayed_request' | 'lost_renewal';

/** Every {@link LessonFault}, in the order the lesson page lists them. */
export const LESSON_FAULTS: readonly LessonFault[] = Object.freeze([
  'pause',
  'delayed_request',
  'lost_renewal',
]);

/**
 * A named starting point of the lesson page; `fencing` and `claim` are left as the reader set
 * them.
 */
export interface LessonPreset {
  readonly id: string;
  readonly label: string;
  readonly options: {
    readonly fault: LessonFault;
    readonly pauseMs: number;
    readonly freezeAtMs: number;
    readonly ttlMs: number;
    readonly renewEveryMs: number;
    /** How long B works after taking the lease before its first write. */
    readonly bWorkMs: number;
  };
}

/** The lesson's numbers (as `leasehold demo`'s defaults): the presets change one or two. */
const THE_LESSON = {
  pauseMs: 12_000,
  freezeAtMs: 2_000,
  ttlMs: 10_000,
  renewEveryMs: 3_000,
  bWorkMs: 1_000,
} as const;

/** The lesson page's presets. */
export const LESSON_PRESETS: readonly LessonPreset[] = Object.freeze([
  {
    id: 'pause_shorter',
    label: 'Pause shorter than the lease',
    options: {
      fault: 'pause',
      ...THE_LESSON,
      pauseMs: 5_000,
    },
  },
  {
    id: 'pause_past',
    label: 'Pause past the lease',
    options: {
      fault: 'pause',
      ...THE_LESSON,
    },
  },
  {
    id: 'delayed_request',
    label: 'Delayed request',
    options: {
      fault: 'delayed_request',
      ...THE_LESSON,
    },
  },
  {
    id: 'lost_renewal',
    label: 'Lost renewal answer',
    options: {
      fault: 'lost_renewal',
      ...THE_LESSON,
    },
  },
  {
    // B takes the lease at 10 s and works until 18 s; A wakes at 14 s, between B's grant and
    // B's first write: storage has not seen B's token yet, unless B claimed it.
    id: 'resume_before_first_write',
    label: "A resumes before B's first write",
    options: {
      fault: 'pause',
      ...THE_LESSON,
      bWorkMs: 8_000,
    },
  },
] satisfies LessonPreset[]);
