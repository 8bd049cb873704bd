// Kept only for src/fencing/catalog/pointers/, which is being changed elsewhere now and still
// imports these names from here. They belong to src/drivers/postgres/ (shared by the store and
// the fences); delete this file once the pointer stores import them from there (issue 47).
export {
  checkIdentifier,
  compileSql,
  lastResult,
  quoteIdent,
  quoteLiteral,
  renderSql,
  resolveConnection,
  timeoutPrefix,
  type PgPool,
  type PostgresConnectionOptions,
  type SqlParam,
} from '../../drivers/postgres/client.js';
