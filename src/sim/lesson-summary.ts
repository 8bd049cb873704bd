import type { LessonParameters, LessonResult, TimelineEntry } from './lesson.js';

/**
 * The story as plain JSON (tokens as decimal strings): what `leasehold demo --json` prints and
 * what the lesson page draws, so the two can be compared field by field.
 */
export interface LessonSummary {
  readonly parameters: LessonParameters;
  readonly timeline: readonly TimelineEntry[];
  readonly headline: string;
  readonly verdict: string;
  readonly outcome: LessonResult['outcome'];
  readonly finalResult: string | null;
  readonly tokens: { readonly a: string | null; readonly b: string | null };
}

/** Reduces a {@link LessonResult} to its {@link LessonSummary} (no history, no report). */
export function summarizeLesson(result: LessonResult): LessonSummary {
  return {
    parameters: result.parameters,
    timeline: result.timeline,
    headline: result.headline,
    verdict: result.verdict,
    outcome: result.outcome,
    finalResult: result.finalResult ?? null,
    tokens: { a: result.tokens.a?.toString() ?? null, b: result.tokens.b?.toString() ?? null },
  };
}

/** Formats the story as the demo prints it. */
export function formatTimeline(result: LessonResult): string {
  const lines = result.timeline.map(
    (e, i) =>
      `${String(i + 1).padStart(3)}. ${seconds(e.t).padStart(8)}  ${e.actor.padEnd(9)} ${e.text}`,
  );
  return [...lines, '', `Verdict: ${result.verdict}`].join('\n');
}

/** Milliseconds as the lesson writes them: `12 s`, `2.5 s`. */
export function seconds(ms: number): string {
  const s = ms / 1000;
  return `${Number.isInteger(s) ? s : s.toFixed(3).replace(/0+$/, '')} s`;
}
