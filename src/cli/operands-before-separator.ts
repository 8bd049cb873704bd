import type { Command } from 'commander';

/**
 * The operands a subcommand was given before `--`, read from the raw command line. Commander
 * merges the operands on both sides of `--` into one list, so `run --ttl 30s -- ./job.sh`
 * would otherwise take `./job.sh` as the key and lease a key named after the command. Options
 * that take a value (`--ttl 30s`, `-q`) are skipped with their value; `--name=value` is one
 * word. `raw` is the whole command line as in `process.argv`. Returns undefined when the command line has no `--`.
 */
export function operandsBeforeSeparator(
  cmd: Command,
  raw: readonly string[],
): string[] | undefined {
  // The program's own options take no value, so the subcommand is the first word that is not
  // an option after the node binary and the script.
  const at = raw.findIndex((word, i) => i >= 2 && word === cmd.name());
  if (at < 0) return undefined;
  const words = raw.slice(at + 1);
  const end = words.indexOf('--');
  if (end < 0) return undefined;
  const takesValue = new Set<string>();
  for (const o of cmd.options) {
    if (!o.required && !o.optional) continue;
    if (o.long !== undefined) takesValue.add(o.long);
    if (o.short !== undefined) takesValue.add(o.short);
  }
  const operands: string[] = [];
  for (let i = 0; i < end; i++) {
    const word = words[i] as string;
    if (word.startsWith('-') && word !== '-') {
      if (!word.includes('=') && takesValue.has(word)) i++;
      continue;
    }
    operands.push(word);
  }
  return operands;
}
