/** The owner watch's probe (src/worker/ownerWatch.ts): each process asks about its neighbours in the ring of owners. */
import { describe, expect, it } from 'vitest';
import { PROBE_FANOUT, probeTargets, WATCH_SPREAD, watchSpread } from '../../src/worker/ownerWatch.js';

const owners = (n: number) => Array.from({ length: n }, (_, i) => `${100 + i * 7}-a1b2c3d4`);

describe('probeTargets', () => {
  it('asks about every other owner while they are no more than the fan-out', () => {
    expect(probeTargets(['1-x'], new Set(['2-x', '3-x']), 2).sort()).toEqual(['2-x', '3-x']);
  });

  it('asks about the owners that follow its own in the sorted ring, wrapping round', () => {
    const all = owners(6).sort();
    const others = (own: string) => new Set(all.filter((o) => o !== own));
    expect(probeTargets([all[1]!], others(all[1]!), 2)).toEqual([all[2], all[3]]);
    expect(probeTargets([all[5]!], others(all[5]!), 2)).toEqual([all[0], all[1]]);
  });

  it('every owner of a fleet is probed by as many processes as the fan-out, each asking about that many', () => {
    for (const n of [3, 5, 20, 57]) {
      const all = owners(n);
      const probedBy = new Map<string, number>();
      for (const own of all) {
        const targets = probeTargets([own], new Set(all.filter((o) => o !== own)), 2);
        expect(targets).toHaveLength(2);
        for (const t of targets) probedBy.set(t, (probedBy.get(t) ?? 0) + 1);
      }
      expect([...probedBy.values()].every((c) => c === 2)).toBe(true);
      expect(probedBy.size).toBe(n);
    }
  });

  it('a process with owners on several shards of one node asks about the neighbours of each', () => {
    const all = owners(8).sort();
    const mine = [all[0]!, all[4]!];
    const others = new Set(all.filter((o) => !mine.includes(o)));
    expect(probeTargets(mine, others, 2).sort()).toEqual([all[1], all[2], all[5], all[6]].sort());
  });

  it('a spread fleet: each owner is probed by fan-out x spread processes, each asking about that many', () => {
    const all = owners(50);
    const spread = watchSpread(all.length);
    const probedBy = new Map<string, number>();
    for (const own of all) {
      const targets = probeTargets([own], new Set(all.filter((o) => o !== own)), PROBE_FANOUT * spread);
      expect(targets).toHaveLength(PROBE_FANOUT * spread);
      for (const t of targets) probedBy.set(t, (probedBy.get(t) ?? 0) + 1);
    }
    expect([...probedBy.values()].every((c) => c === PROBE_FANOUT * spread)).toBe(true);
  });
});

describe('watchSpread', () => {
  it('is 1 below twice WATCH_SPREAD owners on a node, then one more for each WATCH_SPREAD', () => {
    expect([1, 2, WATCH_SPREAD, 2 * WATCH_SPREAD - 1].map(watchSpread)).toEqual([1, 1, 1, 1]);
    expect(watchSpread(2 * WATCH_SPREAD)).toBe(2);
    expect(watchSpread(3 * WATCH_SPREAD - 1)).toBe(2);
    expect(watchSpread(50)).toBe(Math.floor(50 / WATCH_SPREAD));
    expect(watchSpread(0)).toBe(1);
  });
});
