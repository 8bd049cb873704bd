/**
 * Hop-by-hop header fields (RFC 9110 §7.6.1): they describe one connection, so a proxy must
 * not forward them in either direction. `Proxy-*` fields are meant for the next proxy only
 * (RFC 9110 §11.7). The gateway frames each side of the exchange itself.
 */
const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
]);

type Headers = Record<string, string | string[] | number | undefined>;

const NONE: readonly string[] = [];

/** The field names a `Connection` header lists, lower-cased. */
function connectionNamed(value: string | string[] | number | undefined): readonly string[] {
  if (value === undefined) return NONE;
  // What nearly every peer sends: tokens that name no field beyond the fixed list (and no
  // array, split or lower-casing per request).
  if (value === 'keep-alive' || value === 'close' || value === 'Keep-Alive') return NONE;
  const text = Array.isArray(value) ? value.join(',') : String(value);
  return text
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s !== '');
}

function isHopByHop(name: string, named: readonly string[]): boolean {
  return HOP_BY_HOP.has(name) || name.startsWith('proxy-') || named.includes(name);
}

/**
 * Sets the hop-by-hop fields of a request's `headers` (lower-case names, as Node and undici
 * give them) to undefined, in place, and returns it: the fixed list, every `proxy-*` field and
 * the fields the `Connection` header names. undici skips undefined fields, and the object
 * keeps its shape.
 */
export function stripHopByHop<H extends Headers>(headers: H): H {
  const h = headers as Headers;
  const named = connectionNamed(h['connection']);
  for (const name of Object.keys(h)) {
    if (h[name] !== undefined && isHopByHop(name, named)) h[name] = undefined;
  }
  return headers;
}

/**
 * An answer's headers without its hop-by-hop fields, as a new object (Fastify would try to
 * send an undefined field; deleting fields in place turns the object into a slow dictionary
 * that every later read pays for: 2026-12-07, the same-token gateway rows 0.87–0.91× the
 * build before this filter with `delete`, see docs/benchmarks.md).
 */
export function withoutHopByHop<H extends Headers>(headers: H): H {
  const h = headers as Headers;
  const named = connectionNamed(h['connection']);
  const out: Headers = {};
  for (const name of Object.keys(h)) {
    if (!isHopByHop(name, named)) out[name] = h[name];
  }
  return out as H;
}
