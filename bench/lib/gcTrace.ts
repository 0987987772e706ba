/**
 * Sums of V8's `--trace-gc-nvp` lines (one per collection, `key=value` pairs): young-generation collections
 * (`gc=s`, scavenges) and full ones (`gc=mc`). Other lines are ignored. Used by bench/gcTrace.ts.
 */
export class GcTotals {
  scavenges = 0;
  /** Bytes still reachable at a scavenge (copied or promoted). */
  survived = 0;
  /** Bytes a scavenge moved to the old generation. */
  promoted = 0;
  /** Scavenges' pause on the main thread. */
  scavengeMs = 0;
  /** Scavenges' time on V8's helper threads (CPU of the process too). */
  helperMs = 0;
  fullCollections = 0;
  fullMs = 0;

  add(line: string): void {
    const f = fields(line);
    const num = (k: string) => Number(f.get(k) ?? 0);
    if (f.get('gc') === 's') {
      this.scavenges++;
      this.survived += num('new_space_survived');
      this.promoted += num('promoted');
      this.scavengeMs += num('pause');
      this.helperMs += num('background.scavenge.parallel');
    } else if (f.get('gc') === 'mc') {
      this.fullCollections++;
      this.fullMs += num('pause');
    }
  }
}

function fields(line: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of line.split(' ')) {
    const eq = part.indexOf('=');
    if (eq > 0) out.set(part.slice(0, eq), part.slice(eq + 1));
  }
  return out;
}
