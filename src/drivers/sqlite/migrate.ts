/** The part of a better-sqlite3 `Database` the migration runner calls (structural). */
export interface SqliteMigrationTarget {
  exec(sql: string): unknown;
  prepare(sql: string): {
    get(...params: unknown[]): unknown;
    run(...params: unknown[]): unknown;
  };
  transaction<Args extends unknown[], Result>(
    fn: (...args: Args) => Result,
  ): { immediate(...args: Args): Result };
}

/** One numbered migration: the name it is recorded under and its SQL, read when needed. */
export interface SqliteMigration {
  readonly name: string;
  readonly sql: () => string;
}

/** Where the migrations applied are recorded: a table of `name` and an applied time. */
export interface SqliteMigrationRecord {
  /** `CREATE TABLE IF NOT EXISTS` of the record. */
  readonly create: string;
  /** Params: name. A row when the migration was applied. */
  readonly seen: string;
  /** Params: name, applied time. */
  readonly add: string;
  /** The applied time to record (the record's column type decides number or bigint). */
  readonly appliedAt: () => number | bigint;
}

/**
 * Applies the numbered migrations not yet recorded, in order, in one immediate transaction:
 * two processes opening one new file migrate it once, and a failed migration leaves nothing
 * half done. The lease store and the catalog's pointer store both run their files through it.
 */
export function applySqliteMigrations(
  db: SqliteMigrationTarget,
  record: SqliteMigrationRecord,
  migrations: readonly SqliteMigration[],
): void {
  db.transaction(() => {
    db.exec(record.create);
    const seen = db.prepare(record.seen);
    const add = db.prepare(record.add);
    for (const m of migrations) {
      if (seen.get(m.name) !== undefined) continue;
      db.exec(m.sql());
      add.run(m.name, record.appliedAt());
    }
  }).immediate();
}
