import fc from 'fast-check';

/** One generated HTTP request. */
export interface FuzzRequest {
  readonly method: string;
  /** The request target as sent (already percent-encoded where the generator chose to). */
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string | undefined;
  /** Sent as raw bytes on a socket of its own (any framing), not through an HTTP client. */
  readonly raw: boolean;
}

/** What the generator knows about the lease it must not be able to harm. */
export interface HeldLease {
  readonly key: string;
  readonly token: string;
  /** Bearer tokens the generator may present (valid ones included). */
  readonly bearers: readonly string[];
}

const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS'];
const ROUTES = [
  '/v1/acquire',
  '/v1/renew',
  '/v1/release',
  '/v1/batch',
  '/v1/leases',
  '/v1/info',
  '/v1/openapi.json',
  '/v1/fence-decisions',
  '/v1/events',
  '/healthz',
  '/readyz',
  '/metrics',
  '/',
];

/** Strings a careless parser mishandles (VERIFICATION.md, "Bad inputs"). */
const NASTY = [
  '',
  ' ',
  '\u0000',
  '\r\n',
  '%',
  '%E0%A4%A',
  '%00',
  '..',
  '../..',
  '*',
  '?',
  '[',
  '{a}',
  "'; --",
  '%_',
  '\ud800',
  'é',
  'e\u0301',
  '٣',
  'a'.repeat(1025),
  'jobs/',
  'election/',
];

function keys(held: HeldLease): fc.Arbitrary<string> {
  return fc.oneof(
    fc.constant(held.key),
    fc.constantFrom(...NASTY),
    fc.string({ maxLength: 40 }),
    fc.string({ unit: 'binary', maxLength: 20 }),
    fc.string({ maxLength: 20 }).map((s) => `jobs/${s}`),
  );
}

function tokens(held: HeldLease): fc.Arbitrary<unknown> {
  const t = BigInt(held.token);
  return fc.oneof(
    fc.constantFrom(held.token, String(t + 1n), String(t - 1n), '9223372036854775807'),
    fc.constantFrom('9223372036854775808', '0', '-1', '007', '1e3', ' 5', '+5', '0x10', '12abc'),
    fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
    fc.oneof(fc.integer(), fc.double(), fc.constant(null), fc.constant(true), fc.constant([1])),
    fc.constant({ $gt: 0 }),
  );
}

const durations: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer({ min: -1000, max: 120_000 }),
  fc.constantFrom('100ms', '1s', '30s', '5m', '24h', '25h', '-5s', 'NaN', 'Infinity', '1.5'),
  fc.double(),
  fc.string({ maxLength: 8 }),
  fc.constant(null),
);

/** Waits short enough that a generated long poll ends within the run's time bounds. */
const waits: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer({ min: 0, max: 200 }),
  fc.constantFrom('0', '50ms', '-1', 'forever', 2 ** 53),
);

const leaseIds: fc.Arbitrary<unknown> = fc.oneof(
  fc.uuid(),
  fc.constantFrom('', 'not-a-uuid', '00000000-0000-0000-0000-000000000000'),
  fc.string({ maxLength: 40 }),
  fc.integer(),
);

/** The JSON body of one of the API's operations, with fields left out, mistyped or extra. */
function operationBody(held: HeldLease): fc.Arbitrary<unknown> {
  const k = keys(held);
  const fields = {
    key: k,
    ttl: durations,
    wait: waits,
    ownerId: fc.oneof(fc.string({ maxLength: 20 }), fc.constant('a'.repeat(300))),
    value: fc.oneof(fc.string({ maxLength: 20 }), fc.constant('v'.repeat(1100))),
    leaseId: leaseIds,
    token: tokens(held),
    epoch: tokens(held),
    tokenBlock: fc.oneof(fc.integer({ min: -2, max: 100 }), fc.double()),
    result: fc.constantFrom('applied', 'duplicate', 'stale_fence', 'nope'),
    highWaterMark: tokens(held),
    resource: fc.string({ maxLength: 10 }),
    op: fc.constantFrom('acquire', 'renew', 'release', 'steal'),
  };
  const one = fc.record(fields, { requiredKeys: [] });
  return fc.oneof(
    one,
    fc.record({ ops: fc.array(one, { maxLength: 6 }) }),
    fc.record({ ops: fc.oneof(fc.constant([]), fc.anything()) }),
  );
}

/** A body: an operation's JSON, any JSON value, or text that is not JSON. */
function bodies(held: HeldLease): fc.Arbitrary<string | undefined> {
  return fc.oneof(
    { weight: 6, arbitrary: operationBody(held).map((b) => JSON.stringify(b)) },
    { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)) },
    { weight: 1, arbitrary: fc.string({ maxLength: 60 }) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        undefined,
        '',
        '{',
        '{"key":1,"key":2}',
        'null',
        JSON.stringify({ key: 'jobs/big', ttl: 1000, value: 'x'.repeat(17_000) }),
      ),
    },
  );
}

function paths(held: HeldLease): fc.Arbitrary<string> {
  const segment = fc.oneof(keys(held), fc.webSegment());
  const encoded = segment.map((s) => {
    try {
      return encodeURIComponent(s);
    } catch {
      return s; // a lone surrogate: sent as it is
    }
  });
  return fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...ROUTES) },
    { weight: 2, arbitrary: encoded.map((s) => `/v1/leases/${s}`) },
    {
      weight: 2,
      arbitrary: fc
        .tuple(encoded, fc.constantFrom('', '/campaign', '/resign', '/x'))
        .map(([s, tail]) => `/v1/elections/${s}${tail}`),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.constantFrom('/v1/leases', '/v1/events'), fc.webQueryParameters())
        .map(([p, q]) => `${p}?${q}`),
    },
    { weight: 1, arbitrary: fc.webPath().map((p) => (p.startsWith('/') ? p : `/${p}`)) },
    { weight: 1, arbitrary: fc.constantFrom(...NASTY).map((s) => `/v1/leases/${s}`) },
  );
}

function headers(held: HeldLease): fc.Arbitrary<Record<string, string>> {
  return fc
    .record(
      {
        'content-type': fc.constantFrom(
          'application/json',
          'application/json; charset=utf-8',
          'text/plain',
          'application/x-www-form-urlencoded',
          'multipart/form-data; boundary=x',
          'application/json; charset=latin1',
          '',
        ),
        authorization: fc.oneof(
          fc.constantFrom(...held.bearers).map((b) => `Bearer ${b}`),
          fc.constantFrom('Bearer ', 'Basic abc', 'bearer x', `Bearer ${'x'.repeat(600)}`),
          fc.string({ maxLength: 20 }),
        ),
        accept: fc.constantFrom('*/*', 'text/event-stream', 'application/json'),
        'x-fuzz': fc.string({ maxLength: 30 }),
      },
      { requiredKeys: [] },
    )
    .map((h): Record<string, string> => ({ ...h }));
}

/**
 * Requests an API client could plausibly send: the right method and path for an operation, a
 * JSON body with its required fields (valid or nearly so), a bearer token — so that the
 * operations themselves run (grants, busy keys, refused renewals and releases), not only the
 * validation in front of them.
 */
function wellFormed(held: HeldLease): fc.Arbitrary<FuzzRequest> {
  const t = BigInt(held.token);
  const key = fc.oneof(
    fc.constant(held.key),
    fc.constantFrom('jobs/shared', 'jobs/other', 'election/fuzz'),
    fc.string({ minLength: 1, maxLength: 12 }).map((s) => `jobs/${s}`),
  );
  const token = fc.oneof(
    fc.constantFrom(held.token, String(t + 1n), String(t - 1n > 0n ? t - 1n : 1n)),
    fc.bigInt({ min: 1n, max: 50n }).map(String),
    fc.constant('9223372036854775807'),
  );
  const ttl = fc.oneof(fc.integer({ min: 100, max: 600_000 }), fc.constantFrom('1s', '30s', '5m'));
  const opt = <T>(a: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> =>
    fc.option(a, { nil: undefined });
  const acquire = fc.record({
    key,
    ttl,
    wait: opt(fc.integer({ min: 0, max: 100 })),
    ownerId: opt(fc.string({ minLength: 1, maxLength: 10 })),
    value: opt(fc.string({ maxLength: 10 })),
    leaseId: opt(fc.uuid()),
    tokenBlock: opt(fc.integer({ min: 1, max: 3 })),
  });
  const renew = fc.record({ key, leaseId: fc.uuid(), token, ttl });
  const release = fc.record({ key, leaseId: fc.uuid(), token });
  const name = fc.oneof(fc.constantFrom('fuzz', 'e1'), fc.webSegment());
  const post = (path: fc.Arbitrary<string>, body: fc.Arbitrary<unknown>) =>
    fc.record({ method: fc.constant('POST'), path, body: body.map((b) => JSON.stringify(b)) });
  const get = (path: fc.Arbitrary<string>) =>
    fc.record({ method: fc.constant('GET'), path, body: fc.constant(undefined) });
  const route = fc.oneof(
    post(fc.constant('/v1/acquire'), acquire),
    post(fc.constant('/v1/renew'), renew),
    post(fc.constant('/v1/release'), release),
    post(
      fc.constant('/v1/batch'),
      fc.record({
        ops: fc.array(
          fc.oneof(
            acquire.map(({ wait: _w, ...a }) => ({ op: 'acquire', ...a })),
            renew.map((r) => ({ op: 'renew', ...r })),
            release.map((r) => ({ op: 'release', ...r })),
          ),
          { minLength: 1, maxLength: 5 },
        ),
      }),
    ),
    post(
      name.map((n) => `/v1/elections/${encodeURIComponent(n)}/campaign`),
      fc.record({ ttl, wait: opt(fc.integer({ min: 0, max: 100 })), value: opt(fc.string()) }),
    ),
    post(
      name.map((n) => `/v1/elections/${encodeURIComponent(n)}/resign`),
      fc.record({ leaseId: fc.uuid(), epoch: token }),
    ),
    post(
      fc.constant('/v1/fence-decisions'),
      fc.record({
        key,
        token,
        result: fc.constantFrom('applied', 'duplicate', 'stale_fence'),
        highWaterMark: opt(token),
      }),
    ),
    get(key.map((k) => `/v1/leases/${encodeURIComponent(k)}`)),
    get(fc.constantFrom('/v1/leases', '/v1/leases?prefix=jobs%2F&limit=3', '/v1/info')),
    get(name.map((n) => `/v1/elections/${encodeURIComponent(n)}`)),
  );
  return fc
    .tuple(route, fc.constantFrom(...held.bearers), fc.integer({ min: 0, max: 19 }))
    .map(([r, bearer, n]) => ({
      ...r,
      headers: {
        'content-type': 'application/json',
        ...(n === 0 ? {} : { authorization: `Bearer ${bearer}` }),
      },
      raw: n === 1,
    }));
}

/** Anything at all: methods, paths, headers and bodies drawn independently. */
function wild(held: HeldLease): fc.Arbitrary<FuzzRequest> {
  return fc.record({
    method: fc.oneof(
      { weight: 8, arbitrary: fc.constantFrom(...METHODS) },
      { weight: 1, arbitrary: fc.stringMatching(/^[A-Z]{1,8}$/) },
    ),
    path: paths(held),
    headers: headers(held),
    body: bodies(held),
    // One in ten on a raw socket; requests an HTTP client would refuse to send go raw too.
    raw: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
  });
}

/** Requests built from the API's routes and bodies, bent in every direction. */
export function fuzzRequests(held: HeldLease): fc.Arbitrary<FuzzRequest> {
  return fc.oneof({ weight: 1, arbitrary: wellFormed(held) }, { weight: 1, arbitrary: wild(held) });
}
