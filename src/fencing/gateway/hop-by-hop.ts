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

/** The field names a `Connection` header lists, lower-cased. */
function connectionNamed(value: string | string[] | number | undefined): string[] {
  if (value === undefined) return [];
  const text = Array.isArray(value) ? value.join(',') : String(value);
  return text
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s !== '');
}

/**
 * Removes the hop-by-hop fields from `headers` (lower-case names, as Node and undici give
 * them) in place and returns it: the fixed list, every `proxy-*` field and the fields the
 * `Connection` header names. `how`: `undefine` sets them to undefined, which undici skips and
 * which keeps the object's shape (a request's headers); `delete` removes them (an answer's
 * headers, which Fastify would otherwise try to send).
 */
export function stripHopByHop<H extends Headers>(headers: H, how: 'undefine' | 'delete'): H {
  const h = headers as Headers;
  const named = connectionNamed(h['connection']);
  for (const name of Object.keys(h)) {
    if (h[name] === undefined) continue;
    if (HOP_BY_HOP.has(name) || name.startsWith('proxy-') || named.includes(name)) {
      if (how === 'delete') delete h[name];
      else h[name] = undefined;
    }
  }
  return headers;
}
