/**
 * A list of strings as one byte string, one string a line. What an ended run packs (its journal's entries, its
 * events' ids and fields) is JSON written by JSON.stringify or cjson, which never holds a raw newline; as a JSON
 * array of strings every quote inside them would be escaped, which deflate must read, match and store, and JSON.parse
 * undo. As lines, each string comes back as the very bytes it was (a journalled entry's digest is of its bytes), and
 * deflate at level 1 takes a third to a quarter of the CPU level 6 took over the JSON array, for a few percent more
 * bytes (bench section `bytes`, docs/benchmarks.md). A list with a newline in one of its strings has no line form: its
 * owner keeps the JSON array for it.
 */

const NEWLINE = '\n';

/** The strings as lines; undefined when one holds a newline (or the list is empty: no line form tells it apart). */
export function toLines(list: readonly string[]): Buffer | undefined {
  if (list.length === 0 || list.some((s) => s.includes(NEWLINE))) return undefined;
  return Buffer.from(list.join(NEWLINE), 'utf8');
}

/** The strings of toLines's bytes. */
export function fromLines(lines: Buffer): string[] {
  return lines.toString('utf8').split(NEWLINE);
}
