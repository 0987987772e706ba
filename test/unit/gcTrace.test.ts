import { describe, expect, it } from 'vitest';
import { GcTotals } from '../../bench/lib/gcTrace.js';

// Lines as Node 24's V8 prints them with --trace-gc-nvp (fields cut down; the order and the prefix are V8's).
const scavenge =
  '[12767:0x1f485000:0]     7677 ms: pause=15.8 mutator=317.8 gc=s reduce_memory=0 scavenge=15.71 ' +
  'scavenge.roots=0.19 scavenge.parallel=9.37 background.scavenge.parallel=39.97 allocated=51270344 ' +
  'promoted=3331832 new_space_survived=5203256 promotion_rate=94.8%';
const full =
  '[12767:0x1f485000:0]     7274 ms: pause=8.9 mutator=59.7 gc=mc reduce_memory=0 time_to_safepoint=0.00 ' +
  'heap.prologue=0.00 mark=6.12 promoted=5044224';

describe('GcTotals (bench/gcTrace.ts)', () => {
  it('sums scavenges and full collections from V8 trace lines, ignoring every other line', () => {
    const t = new GcTotals();
    for (const line of [scavenge, 'gc-trace: measuring', full, scavenge, '{"level":40,"msg":"worker error"}'])
      t.add(line);
    expect(t.scavenges).toBe(2);
    expect(t.survived).toBe(2 * 5203256);
    expect(t.promoted).toBe(2 * 3331832);
    expect(t.scavengeMs).toBeCloseTo(31.6);
    expect(t.helperMs).toBeCloseTo(79.94);
    expect(t.fullCollections).toBe(1);
    expect(t.fullMs).toBeCloseTo(8.9);
  });
});
