/**
 * Where a command writes: stdout and stderr by default, a buffer in tests. Commands return
 * their exit code instead of calling `process.exit`, so they can be run as functions.
 */
export interface CommandIo {
  out(line: string): void;
  err(line: string): void;
}

/** Writes to the process's stdout and stderr. */
export const processIo: CommandIo = Object.freeze({
  out: (line: string) => {
    process.stdout.write(`${line}\n`);
  },
  err: (line: string) => {
    process.stderr.write(`${line}\n`);
  },
});
