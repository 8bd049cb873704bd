export {
  createGateway,
  GATEWAY_DEFAULTS,
  ADMIN_PREFIX,
  type Gateway,
  type GatewayOptions,
} from './gateway.js';
export { loadGatewayConfig, parseGatewayConfig, type GatewayConfigFile } from './config.js';
export { parseRouteFlag, SAFE_METHODS, type GatewayRoute } from './routes.js';
export { GatewayMetrics } from './metrics.js';
export { REPLAYED_HEADER, REPLAYED_ANSWER_HEADERS } from '../http/answer-replay.js';
export {
  MARK_HEADER,
  VERSION_HEADER,
  FENCE_HEADERS,
  type FenceHeaderNames,
} from '../http/fence-headers.js';
export { type FenceErrorCode } from '../http/fence-error.js';
export {
  GatewayClaimClient,
  type GatewayClaimClientOptions,
} from '../http/gateway-claim-client.js';
export { CLAIM_PATH } from './claim-route.js';
export { openMarkStore } from '../marks/open-mark-store.js';
export { SqliteMarkStore, type SqliteMarkStoreOptions } from '../marks/sqlite.js';
export type {
  AnswerRecord,
  MarkDecision,
  MarkPolicy,
  MarkRequest,
  MarkStore,
  ScopeHold,
} from '../marks/mark-store.js';
