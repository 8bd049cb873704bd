/**
 * The keys of a semaphore's slots. Slot `i` of semaphore `name` is the ordinary key
 * `name#slot=i`, so every store grants, renews, fences and lists it like any other key, and
 * each slot keeps its own token counter. The text `#slot=` is reserved: a key containing it
 * must be exactly one slot key (the name itself without the marker, the index in canonical
 * decimal below {@link MAX_SLOTS}), and `acquire` refuses slot keys, so a plain key can never
 * stand in for a slot (decision 046).
 */

/** Separates a semaphore's name from a slot's index in the slot's key. */
export const SLOT_MARKER = '#slot=';

/** The most slots one semaphore may have. */
export const MAX_SLOTS = 1024;

const CANONICAL_INDEX = /^(0|[1-9][0-9]{0,3})$/;

/** The key of slot `index` of semaphore `name` (both already checked). */
export function slotKey(name: string, index: number): string {
  return `${name}${SLOT_MARKER}${index}`;
}

/** The prefix every slot key of `name` starts with: for `list`. */
export function slotPrefix(name: string): string {
  return `${name}${SLOT_MARKER}`;
}

/** A slot key taken apart. */
export interface SlotKey {
  readonly name: string;
  readonly slot: number;
}

/** `key` taken apart when it is a well-formed slot key; undefined for every other key. */
export function parseSlotKey(key: string): SlotKey | undefined {
  const at = key.indexOf(SLOT_MARKER);
  if (at <= 0) return undefined;
  const name = key.slice(0, at);
  const index = key.slice(at + SLOT_MARKER.length);
  if (!CANONICAL_INDEX.test(index)) return undefined;
  const slot = Number(index);
  if (slot >= MAX_SLOTS) return undefined;
  return { name, slot };
}

/** Whether `key` contains the reserved marker at all (well-formed slot key or not). */
export function hasSlotMarker(key: string): boolean {
  return key.includes(SLOT_MARKER);
}
