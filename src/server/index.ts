export { createLeaseServer, SERVER_DEFAULTS } from './server.js';
export type { LeaseServer, LeaseServerOptions } from './server.js';
export { Authenticator, VERBS } from '../http-service/auth.js';
export type { AuthConfig, AuthTokenConfig, Principal, Verb } from '../http-service/auth.js';
export { loadServerConfig } from './config.js';
export type { ServerConfigFile } from './config.js';
export type { ServerEvent, ServerEventType } from './event-hub.js';
export { API_ERROR_STATUS } from './http-errors.js';
export type { ApiErrorCode } from './http-errors.js';
