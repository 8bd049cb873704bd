/** Node's codes for a connection that failed, in words a person setting up a service reads. */
const WORDS: Readonly<Record<string, string>> = Object.freeze({
  ECONNREFUSED: 'connection refused',
  ETIMEDOUT: 'the connection timed out',
  EHOSTUNREACH: 'no route to the host',
  ENETUNREACH: 'the network is unreachable',
  EHOSTDOWN: 'the host is down',
  ECONNRESET: 'the connection was reset',
  ECONNABORTED: 'the connection was aborted',
  EPIPE: 'the connection was closed',
  EADDRNOTAVAIL: 'the address is not available here',
  EACCES: 'permission denied',
});

/** Name lookups that failed: the host name is what is wrong, not the service. */
const LOOKUP = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME']);

/** Why a connection failed, as {@link networkCause} found it. */
export interface NetworkCause {
  /** Node's code, such as `ECONNREFUSED` or `ENOTFOUND`. */
  readonly code: string;
  /** The cause in words: `connection refused`, `the host name "db" could not be resolved`. */
  readonly words: string;
}

function lookupWords(code: string, host: string | undefined): string {
  const name = host === undefined ? 'the host name' : `the host name "${host}"`;
  return code === 'EAI_AGAIN'
    ? `${name} could not be resolved (the name server did not answer)`
    : `${name} could not be resolved`;
}

/** A Node system error's own fields: `code`, and `hostname` for a failed lookup. */
function fromFields(e: object): NetworkCause | undefined {
  const { code, hostname } = e as { code?: unknown; hostname?: unknown };
  if (typeof code !== 'string') return undefined;
  if (LOOKUP.has(code))
    return { code, words: lookupWords(code, typeof hostname === 'string' ? hostname : undefined) };
  const words = WORDS[code];
  return words === undefined ? undefined : { code, words };
}

/** The same, read from a message, for drivers that keep only the text (gRPC's "… Last error: connect ECONNREFUSED 10.0.0.1:2379"). */
function fromMessage(e: object): NetworkCause | undefined {
  const { message } = e as { message?: unknown };
  if (typeof message !== 'string') return undefined;
  const lookup = /getaddrinfo (ENOTFOUND|EAI_AGAIN|EAI_FAIL|EAI_NONAME) ([^\s()"',;]+)/.exec(
    message,
  );
  if (lookup !== null) return { code: lookup[1]!, words: lookupWords(lookup[1]!, lookup[2]) };
  const connect = /\b(?:connect|read|write) (E[A-Z]+)\b/.exec(message);
  const words = connect === null ? undefined : WORDS[connect[1]!];
  return words === undefined ? undefined : { code: connect![1]!, words };
}

/**
 * Why a connection failed, found in `err`, its `cause` chain or the errors of an
 * `AggregateError` (Node's happy-eyeballs connect gives one per address): a refused connection,
 * a host name that could not be resolved (named), a timeout, an unreachable network.
 * Undefined when none of them is a connection failure.
 *
 * @example
 * networkCause(err)?.words; // 'the host name "db" could not be resolved'
 */
export function networkCause(err: unknown): NetworkCause | undefined {
  const chain: object[] = [];
  const queue: unknown[] = [err];
  while (queue.length > 0 && chain.length < 16) {
    const e = queue.shift();
    if (typeof e !== 'object' || e === null) continue;
    chain.push(e);
    const { cause, errors } = e as { cause?: unknown; errors?: unknown };
    if (cause !== undefined) queue.push(cause);
    if (Array.isArray(errors)) queue.push(...(errors as unknown[]));
  }
  // A system error's own fields first: a wrapper's message may quote it with more around it.
  for (const e of chain) {
    const found = fromFields(e);
    if (found !== undefined) return found;
  }
  for (const e of chain) {
    const found = fromMessage(e);
    if (found !== undefined) return found;
  }
  return undefined;
}
