import type { Logger, pino as Pino } from 'pino';

/**
 * The JSON logger a service writes to stderr when the caller brings none: `service` names it
 * in every line, and the `Authorization` header never reaches the log. The caller passes pino
 * in, as it loaded it (the server loads it as an optional peer with an error naming the package).
 */
export function serviceLogger(
  loaded: { pino: typeof Pino },
  service: string,
  level = 'info',
): Logger {
  const { pino } = loaded;
  return pino(
    {
      level,
      base: { service },
      redact: ['req.headers.authorization', 'headers.authorization'],
    },
    pino.destination(2),
  );
}
