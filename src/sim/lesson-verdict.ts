import type { LessonFault } from './lesson-presets.js';

/**
 * How the lesson's story ended: `overwritten` (storage accepted A's late write over B's, the
 * lesson's failure), `stale_accepted` (storage accepted A's write after B took the lease but
 * before B's first write: fencing alone cannot tell, a claim can), `rejected` (storage refused
 * A's late write), `one_owner` (never two owners at once).
 */
export type LessonOutcome = 'overwritten' | 'stale_accepted' | 'rejected' | 'one_owner';

/** What the story's verdict is computed from. */
export interface VerdictInput {
  readonly fault: LessonFault;
  readonly fencing: boolean;
  readonly tokens: { readonly a: bigint | undefined; readonly b: bigint | undefined };
  readonly results: { readonly a?: string; readonly b?: string };
  readonly finalResult: string | undefined;
  /** A's write was accepted while B held the lease and had not written yet. */
  readonly aStaleAccepted: boolean;
  /** A's write was refused before B's first write: only a claim can have done that. */
  readonly aRefusedBeforeB: boolean;
  /** A saw its lease gone and did not write. */
  readonly aSkipped: boolean;
}

/** The story's outcome, its one-sentence headline and its explanation. */
export function lessonVerdict(i: VerdictInput): {
  outcome: LessonOutcome;
  headline: string;
  verdict: string;
} {
  const { fault, fencing, tokens, results, finalResult } = i;
  const bothWrote = results.a === 'applied' && results.b === 'applied';
  const aLate = tokens.b !== undefined && finalResult === "A's result" && bothWrote;
  const during =
    fault === 'pause'
      ? 'during the pause'
      : fault === 'delayed_request'
        ? 'while its write was held in the network'
        : 'while its renewal answers were lost';
  if (aLate)
    return {
      outcome: 'overwritten',
      headline: "Storage accepted A's late write and overwrote B's result.",
      verdict: `Two workers acted as the owner. A's lease expired ${during}, B took over, and storage accepted A's late write anyway. The job's result is now whatever A wrote last.`,
    };
  if (i.aStaleAccepted)
    return {
      outcome: 'stale_accepted',
      headline: `Storage accepted A's stale write (token ${tokens.a}) before B's first write.`,
      verdict: fencing
        ? `Two workers acted as the owner. A's lease expired ${during} and B took over with token ${tokens.b}, but A resumed before B's first write. Storage checks tokens, yet it had never seen token ${tokens.b}, so token ${tokens.a} still passed. B's write replaced it later, but until then the job's result was A's stale one. A claim closes this gap: B installs token ${tokens.b} at storage as it takes the lease.`
        : `Two workers acted as the owner. A's lease expired ${during} and B took over with token ${tokens.b}, but A resumed before B's first write, and storage, which does not check tokens, accepted it. B's write replaced it later, but until then the job's result was A's stale one.`,
    };
  if (i.aRefusedBeforeB)
    return {
      outcome: 'rejected',
      headline: `Storage rejected token ${tokens.a}: B had claimed ${tokens.b} before its first write.`,
      verdict: `Two workers acted as the owner, but B claimed its token ${tokens.b} at storage as it took the lease, before writing anything. A's late write (token ${tokens.a}) was rejected even though B had not written yet. The job's result is B's.`,
    };
  if (results.a === 'stale_fence')
    return {
      outcome: 'rejected',
      headline: `Storage rejected token ${tokens.a} after ${tokens.b}.`,
      verdict: `Two workers acted as the owner, but storage checked the fencing token: A's late write (token ${tokens.a}) was rejected after B's (token ${tokens.b}). The job's result is B's.`,
    };
  if (i.aSkipped)
    return {
      outcome: 'one_owner',
      headline: "One owner at a time: A stopped without writing, and B's result stands.",
      verdict: `One owner at a time: A could not confirm its lease, stopped at its own deadline without writing, and B took the lease only after it ran out at the lock. The job's result is ${finalResult ?? 'unset'}.`,
    };
  return {
    outcome: 'one_owner',
    headline: `One owner at a time: A wrote while it held the lease, and B took over after A released it.`,
    verdict: `One owner at a time: A's ${fault === 'pause' ? 'pause' : 'trouble'} ended before its lease ran out, and B took over only after A released it. The job's result is ${finalResult ?? 'unset'}.`,
  };
}
