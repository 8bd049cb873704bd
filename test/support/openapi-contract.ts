import { Ajv, type ValidateFunction } from 'ajv';
import type { FastifyInstance } from 'fastify';
import { openApiDocument } from '../../src/server/openapi.js';
import { ERROR_BODY } from '../../src/server/answer-schemas.js';
import { VERSION } from '../../src/server/version.js';

/** One answer of the server as a client sees it. */
export interface WireAnswer {
  readonly method: string;
  /** The route pattern Fastify matched (`/v1/leases/*`), or undefined when none matched. */
  readonly route: string | undefined;
  readonly url: string;
  readonly status: number;
  readonly contentType: string | undefined;
  /** The body text ('' for none). */
  readonly body: string;
}

interface Operation {
  responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
}

/**
 * Checks answers of the server against its own OpenAPI document (`src/server/openapi.ts`): a
 * documented route may answer only the statuses its operation declares (or `default`), with a
 * JSON body matching the declared schema; every answer with status ≥ 400, documented route or
 * not, must be `{"error":{"code","message"}}`. Answers of routes the document does not describe
 * (the dashboard page) are checked for the error shape only.
 */
export class OpenApiContract {
  private readonly ajv = new Ajv({ strict: false, allErrors: false, discriminator: true });
  private readonly ops = new Map<string, Operation>();
  private readonly validators = new Map<unknown, ValidateFunction>();
  private readonly errorBody: ValidateFunction;

  constructor() {
    const doc = openApiDocument(VERSION) as { paths: Record<string, Record<string, Operation>> };
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(methods)) {
        this.ops.set(`${method.toUpperCase()} ${path}`, op);
      }
    }
    this.errorBody = this.ajv.compile(ERROR_BODY);
  }

  /** The violation in `a`, described, or undefined when it matches the document. */
  check(a: WireAnswer): string | undefined {
    const where = `${a.method} ${a.url} → ${a.status}`;
    const noBody = a.method === 'HEAD' || a.status === 204 || a.status === 304;
    const method = a.method === 'HEAD' ? 'GET' : a.method;
    const op =
      a.route === undefined ? undefined : this.ops.get(`${method} ${openApiPath(a.route)}`);
    if (op === undefined) {
      if (a.status < 400)
        return a.route === undefined ? `${where}: success without a route` : undefined;
      if (!ANY_REQUEST_STATUSES.has(a.status)) {
        return `${where}: not a status documented for requests outside the operations`;
      }
      return noBody ? undefined : this.validateJson(where, a, this.errorBody);
    }
    const response =
      op.responses[String(a.status)] ??
      (ANY_REQUEST_STATUSES.has(a.status) ? { content: undefined } : undefined);
    if (response === undefined) {
      return `${where}: status not declared for ${method} ${openApiPath(a.route!)} (declared: ${Object.keys(op.responses).join(', ')})`;
    }
    const schema = response.content?.['application/json']?.schema;
    if (noBody) return undefined;
    if (schema === undefined) {
      return a.status >= 400 ? this.validateJson(where, a, this.errorBody) : undefined;
    }
    return this.validateJson(where, a, this.compiled(schema));
  }

  private compiled(schema: unknown): ValidateFunction {
    let v = this.validators.get(schema);
    if (v === undefined) {
      v = this.ajv.compile(schema as object);
      this.validators.set(schema, v);
    }
    return v;
  }

  private validateJson(
    where: string,
    a: WireAnswer,
    validate: ValidateFunction,
  ): string | undefined {
    if (a.contentType === undefined || !a.contentType.startsWith('application/json')) {
      return `${where}: content-type ${String(a.contentType)}, not application/json`;
    }
    let value: unknown;
    try {
      value = JSON.parse(a.body);
    } catch {
      return `${where}: body is not JSON: ${a.body.slice(0, 200)}`;
    }
    if (validate(value)) return undefined;
    const e = validate.errors?.[0];
    return `${where}: ${e?.instancePath ?? ''} ${e?.message ?? 'invalid'} (${JSON.stringify(e?.params)}) in ${a.body.slice(0, 300)}`;
  }
}

/**
 * Statuses any request may get, whatever its operation declares (the document's description,
 * docs/server.md "Errors"), always with the error body: a malformed request or no Host, an
 * unknown path, a known path with another method, a timeout, a body, URL or headers too large,
 * a server shutting down.
 */
const ANY_REQUEST_STATUSES = new Set([400, 404, 405, 408, 413, 414, 431, 503]);

/** `/v1/leases/*` → `/v1/leases/{key}`, `/v1/elections/:name` → `/v1/elections/{name}`. */
function openApiPath(route: string): string {
  return route.replace(/\*$/, '{key}').replace(/:([A-Za-z]+)/g, '{$1}');
}

/** What {@link checkResponses} found. */
export interface ResponseCheck {
  /** Answers checked so far. */
  readonly checked: () => number;
  /** Violations so far, described. */
  readonly violations: string[];
}

/**
 * Checks every answer `app` sends through Fastify's reply path (routes, the not-found handler,
 * the error handler, router errors) against the OpenAPI document. Answers written to the raw
 * socket (framing errors) and event streams do not pass here; the raw-socket tests check those.
 * Call before the server starts listening.
 */
export function checkResponses(app: FastifyInstance): ResponseCheck {
  const contract = new OpenApiContract();
  const violations: string[] = [];
  let checked = 0;
  app.addHook('onSend', (req, reply, payload, done) => {
    checked++;
    const body =
      typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString() : '';
    const type = reply.getHeader('content-type');
    const v = contract.check({
      method: req.method,
      route: req.is404 ? undefined : req.routeOptions.url,
      url: req.url.split('?')[0] ?? req.url,
      status: reply.statusCode,
      contentType: typeof type === 'string' ? type : undefined,
      body,
    });
    if (v !== undefined) violations.push(v);
    done(null, payload);
  });
  return { checked: () => checked, violations };
}
