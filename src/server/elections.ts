import type { FastifyInstance, FastifyRequest } from 'fastify';
import { validateKey } from '../core/validate.js';
import { acquireRoute } from './acquire-route.js';
import { principalOf, releaseRoute } from './api.js';
import { clientWatch } from './client-watch.js';
import { mayRead, ANONYMOUS } from '../http-service/auth.js';
import type { ServerContext } from './context.js';
import { ApiError } from './http-errors.js';
import { wholeMs } from './json.js';
import { CAMPAIGN_BODY, ELECTION_PARAMS, RESIGN_BODY } from './schemas.js';

/** An election's lease key is `election/NAME`, as in the client library's `Election`. */
const ELECTION_PREFIX = 'election/';

interface CampaignBody {
  ttl: unknown;
  wait?: unknown;
  ownerId?: unknown;
  value?: unknown;
  leaseId?: string;
}
interface ResignBody {
  leaseId: string;
  epoch: unknown;
}

function electionKey(req: FastifyRequest): { name: string; key: string } {
  const name = (req.params as { name: string }).name;
  return { name, key: validateKey(`${ELECTION_PREFIX}${name}`, 'name') };
}

/**
 * Registers the election routes of `/v1` for clients in any language:
 *
 * - `POST /v1/elections/{name}/campaign` — wait (bounded by `wait`) to lead; answers the
 *   leader's `leaseId`, `epoch` (the lease token, a decimal string) and `ttlMs`. The server does
 *   **not** renew it: the leader renews through `POST /v1/renew` (key `election/NAME`, token =
 *   epoch) and steps down when a renewal fails or its TTL runs out locally. A server-side
 *   renewal would keep a crashed remote leader in office.
 * - `GET /v1/elections/{name}` — observe: the current leader (owner, epoch, value, remaining
 *   time) or null, and the last epoch. Changes are pushed on `GET /v1/events?key=election/NAME`.
 * - `POST /v1/elections/{name}/resign` — `{leaseId, epoch}`: release the leadership.
 *
 * Authorisation applies to the key `election/NAME` with the verbs `acquire` (campaign),
 * `release` (resign) and read (observe).
 */
export function registerElectionRoutes(app: FastifyInstance, ctx: ServerContext): void {
  const config = { auth: true };

  app.post(
    '/v1/elections/:name/campaign',
    { schema: { params: ELECTION_PARAMS, body: CAMPAIGN_BODY }, config },
    async (req, reply) => {
      const { name, key } = electionKey(req);
      const b = req.body as CampaignBody;
      const r = await acquireRoute(ctx, principalOf(req), clientWatch(reply), key, b);
      return {
        status: 'elected',
        name,
        key,
        leaseId: r.leaseId,
        epoch: r.token,
        ownerId: r.ownerId,
        ttlMs: r.ttlMs,
        waitedMs: r.waitedMs,
        ...(r.expiresAtWallMs === undefined ? {} : { expiresAtWallMs: r.expiresAtWallMs }),
      };
    },
  );

  app.get('/v1/elections/:name', { schema: { params: ELECTION_PARAMS }, config }, async (req) => {
    const { name, key } = electionKey(req);
    const principal = req.principal ?? ANONYMOUS;
    if (!mayRead(principal, key)) {
      throw new ApiError(
        'permission_denied',
        `token ${principal.name} may not read ${JSON.stringify(key)}`,
      );
    }
    const state = await ctx.metrics.timeStore('inspect', () =>
      ctx.store.inspect(key, ctx.storeOptions),
    );
    const h = state.holder;
    return {
      name,
      key,
      lastEpoch: state.lastToken.toString(),
      leader:
        h === undefined
          ? null
          : {
              ownerId: h.ownerId,
              epoch: h.token.toString(),
              remainingMs: wholeMs(h.remainingMs),
              leaseIdPrefix: h.leaseIdPrefix,
              ...(h.value === undefined ? {} : { value: h.value }),
            },
    };
  });

  app.post(
    '/v1/elections/:name/resign',
    { schema: { params: ELECTION_PARAMS, body: RESIGN_BODY }, config },
    async (req) => {
      const { key } = electionKey(req);
      const b = req.body as ResignBody;
      await releaseRoute(ctx, principalOf(req), key, b.leaseId, b.epoch, 'epoch');
      return { status: 'resigned' };
    },
  );
}
