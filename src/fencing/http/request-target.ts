/**
 * The one request target the gateway and the middleware work on: checked once per request, it
 * decides the route, the fencing scope and — in the gateway — the exact bytes forwarded
 * upstream. A target that different HTTP stacks could read as different paths is refused
 * rather than rewritten (decision 032): a proxy that scopes one URL and forwards another lets a
 * stale token reach the upstream under a scope whose mark it never met.
 */

/** The rule a refused request target broke; the same strings in answers, logs and metrics. */
export type TargetRule =
  /** Not origin-form: absolute-form (`http://host/…`), authority-form or `*`. */
  | 'not_origin_form'
  /** A `#`: clients never send fragments; parsers disagree on where the path ends. */
  | 'fragment'
  /** A `\`: WHATWG URL parsers and some servers read it as `/`. */
  | 'backslash'
  /** A `.` or `..` segment, or one starting or ending in `..`: resolved by some parsers. */
  | 'dot_segment'
  /** An empty segment (`//`): merged by some servers, a host by WHATWG URL parsers. */
  | 'empty_segment'
  /** `%2F`, `%5C`, `%2E` or `%00` in the path: decoded into a separator by some servers. */
  | 'encoded_separator'
  /** A percent-encoded letter, digit, `-`, `_` or `~` (RFC 3986 §6.2.2.2 says decode them). */
  | 'encoded_unreserved'
  /** A `%` not followed by two hex digits, or escapes that do not decode to UTF-8. */
  | 'bad_percent_encoding'
  /** A `;` in the path: path parameters, stripped before routing by some servers. */
  | 'path_parameter'
  /** A character RFC 3986 does not allow there (space, quotes, `<>{}|^`, non-ASCII, controls). */
  | 'invalid_character';

/** Every rule, for metrics and docs. */
export const TARGET_RULES: readonly TargetRule[] = Object.freeze([
  'not_origin_form',
  'fragment',
  'backslash',
  'dot_segment',
  'empty_segment',
  'encoded_separator',
  'encoded_unreserved',
  'bad_percent_encoding',
  'path_parameter',
  'invalid_character',
]);

/** The outcome of {@link checkRequestTarget}. */
export type RequestTarget =
  /**
   * Canonical: `target` is the request target as received (forward it as it is), `path` the
   * part before `?` (match routes on it), `query` the part from `?` on, or ''.
   */
  | {
      readonly status: 'canonical';
      readonly target: string;
      readonly path: string;
      readonly query: string;
    }
  | { readonly status: 'refused'; readonly rule: TargetRule; readonly message: string };

const PERCENT = 0x25;
const DOT = 0x2e;
const SLASH = 0x2f;
const QUESTION = 0x3f;

/**
 * Per ASCII code: 1 allowed in a path segment (RFC 3986 pchar minus `%` and `;`), 2 allowed
 * only in the query or as a delimiter (RFC 3986 query, plus what browsers send unencoded in
 * a query: `[]{}|^` and backquote, which no parser reads as a path separator), 0 refused.
 */
const ALLOWED = new Uint8Array(128);
for (const c of "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,=:@")
  ALLOWED[c.charCodeAt(0)] = 1;
for (const c of '/?;[]{}|^`') ALLOWED[c.charCodeAt(0)] = 2;

/** The value of a hex digit's character code, or -1. */
function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const lower = c | 0x20;
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x57 : -1;
}

/** The byte `%XX` at `i` encodes, or -1 when two hex digits do not follow the `%`. */
function escapedByte(target: string, i: number): number {
  const hi = hexValue(target.charCodeAt(i + 1));
  const lo = hexValue(target.charCodeAt(i + 2));
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/** Bytes RFC 3986 calls unreserved (letters, digits, `-._~`): sent unencoded. */
function isUnreserved(b: number): boolean {
  return (
    (b >= 0x41 && b <= 0x5a) ||
    (b >= 0x61 && b <= 0x7a) ||
    (b >= 0x30 && b <= 0x39) ||
    b === 0x2d ||
    b === 0x2e ||
    b === 0x5f ||
    b === 0x7e
  );
}

function refuse(rule: TargetRule, detail: string): RequestTarget {
  return { status: 'refused', rule, message: `request target refused (${rule}): ${detail}` };
}

/** Checks one `%XX` of the path at `i`; undefined when it is allowed. */
function pathEscape(target: string, i: number): RequestTarget | undefined {
  const b = escapedByte(target, i);
  if (b < 0)
    return refuse('bad_percent_encoding', `'%' at offset ${i} is not followed by two hex digits`);
  const hex = target.slice(i + 1, i + 3);
  if (b === 0x2f || b === 0x5c || b === 0x2e || b === 0)
    return refuse('encoded_separator', `%${hex} at offset ${i} encodes a separator or NUL`);
  if (isUnreserved(b))
    return refuse(
      'encoded_unreserved',
      `%${hex} at offset ${i} encodes '${String.fromCharCode(b)}', which is sent unencoded`,
    );
  return undefined;
}

/** Checks the segment that ends at `end` (exclusive) and starts after the `/` at `slash`. */
function segment(
  target: string,
  slash: number,
  end: number,
  last: boolean,
): RequestTarget | undefined {
  const len = end - slash - 1;
  if (len === 0) return last ? undefined : refuse('empty_segment', `'//' at offset ${slash}`);
  // `.`, `..` and `..x`: reply-from and some servers treat any `/..` as a parent reference.
  if (target.charCodeAt(slash + 1) === DOT && (len === 1 || target.charCodeAt(slash + 2) === DOT))
    return refuse('dot_segment', `segment at offset ${slash + 1} is or starts with a dot segment`);
  if (len >= 2 && target.charCodeAt(end - 1) === DOT && target.charCodeAt(end - 2) === DOT)
    return refuse('dot_segment', `segment at offset ${slash + 1} ends with '..'`);
  return undefined;
}

/**
 * Checks a raw HTTP request target (`req.url` as Node received it). Canonical targets are
 * origin-form, use only the characters RFC 3986 allows, have no dot or empty segments, no
 * fragment, no backslash, no `;` in the path, and percent-encode only bytes that must be
 * (never a separator, NUL or an unreserved character); their escapes decode to UTF-8. Every
 * such target reads as the same path to Node, WHATWG URL, Python and the common servers, so
 * forwarding it unchanged forwards the path the scope was taken from.
 *
 * One pass over the characters, no allocation for a canonical target without escapes.
 */
export function checkRequestTarget(target: string): RequestTarget {
  if (target.charCodeAt(0) !== SLASH)
    return refuse('not_origin_form', 'the target must start with / (origin-form)');
  let slash = 0;
  let question = -1;
  let escapes = false;
  for (let i = 1; i < target.length; i++) {
    const c = target.charCodeAt(i);
    if (c === 0x23) return refuse('fragment', `'#' at offset ${i}`);
    if (c === 0x5c) return refuse('backslash', `'\\' at offset ${i}`);
    if (c >= 128 || (ALLOWED[c] === 0 && c !== PERCENT))
      return refuse(
        'invalid_character',
        `character ${JSON.stringify(target[i])} (code ${c}) at offset ${i} must be percent-encoded`,
      );
    if (question >= 0) {
      if (c === PERCENT && escapedByte(target, i) < 0)
        return refuse(
          'bad_percent_encoding',
          `'%' at offset ${i} is not followed by two hex digits`,
        );
      continue;
    }
    if (c === SLASH || c === QUESTION) {
      const bad = segment(target, slash, i, c === QUESTION);
      if (bad !== undefined) return bad;
      if (c === SLASH) slash = i;
      else question = i;
    } else if (c === PERCENT) {
      const bad = pathEscape(target, i);
      if (bad !== undefined) return bad;
      escapes = true;
    } else if (c === 0x3b) {
      return refuse('path_parameter', `';' at offset ${i} (path parameters are not forwarded)`);
    } else if (ALLOWED[c] === 2) {
      return refuse(
        'invalid_character',
        `character ${JSON.stringify(target[i])} at offset ${i} must be percent-encoded in the path`,
      );
    }
  }
  const pathEnd = question < 0 ? target.length : question;
  if (question < 0) {
    const bad = segment(target, slash, pathEnd, true);
    if (bad !== undefined) return bad;
  }
  const path = question < 0 ? target : target.slice(0, question);
  if (escapes) {
    try {
      decodeURIComponent(path);
    } catch {
      return refuse('bad_percent_encoding', 'the escapes of the path do not decode to UTF-8');
    }
  }
  return { status: 'canonical', target, path, query: question < 0 ? '' : target.slice(question) };
}
