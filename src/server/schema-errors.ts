import type { FastifySchemaValidationError } from 'fastify';

/** Readable rules for the schema patterns, by field. */
const PATTERN_RULES: Record<string, string> = {
  leaseId: 'must be a UUID (the leaseId returned by acquire)',
  limit: 'must be an integer from 1 to 10000',
  resource: 'must be 1 to 128 printable ASCII characters without spaces',
  highWaterMark: 'must be a canonical decimal string from 0 to 9223372036854775807',
};

/**
 * Fastify's `schemaErrorFormatter`: the first schema error as `FIELD RULE` in plain words
 * (`ttl is required`, `leaseId must be a UUID …`), the message of the 400 answer.
 */
export function schemaError(errors: FastifySchemaValidationError[], dataVar: string): Error {
  const e = errors[0];
  if (e === undefined) return new Error(`${dataVar} is invalid`);
  let field = e.instancePath.replace(/^\//, '').replaceAll('/', '.');
  let message = e.message ?? 'is invalid';
  const params: Record<string, unknown> = e.params;
  const join = (name: unknown): string =>
    field === '' ? String(name) : `${field}.${String(name)}`;
  if (e.keyword === 'required') {
    field = join(params['missingProperty']);
    message = 'is required';
  } else if (e.keyword === 'additionalProperties') {
    field = join(params['additionalProperty']);
    message = 'is not an accepted field';
  } else if (e.keyword === 'pattern') {
    message = PATTERN_RULES[field] ?? 'has the wrong format';
  } else if (e.keyword === 'enum' && Array.isArray(params['allowedValues'])) {
    message = `must be one of ${(params['allowedValues'] as unknown[]).map(String).join(', ')}`;
  } else if (e.keyword === 'type') {
    message = `must be ${String(params['type']).replace(',', ' or ')}`;
  }
  return new Error(`${field === '' ? dataVar : field} ${message}`);
}
