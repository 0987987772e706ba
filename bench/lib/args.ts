/** The bench entry points' command-line arguments: `--key=value` flags and positional arguments. */

/** The value of `--key=value` among this process's arguments, else `fallback`. */
export function flag(key: string, fallback: string): string {
  const prefix = `--${key}=`;
  return process.argv.find((a) => a.startsWith(prefix))?.slice(prefix.length) ?? fallback;
}

/** The arguments that are not flags (`--...`), in order. */
export function positionals(): string[] {
  return process.argv.slice(2).filter((a) => !a.startsWith('--'));
}
