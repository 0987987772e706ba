/** The cost-per-step guard (bench/guard.ts): counts held tightly, CPU as a ratio to the plain chain, loosely. */
import { describe, expect, it } from 'vitest';
import { compare, figuresOf, recordedFigures, TOLERANCE } from '../../bench/guard.js';

const round = (over: Partial<Record<string, number>> = {}) => ({
  nodeCpuUsPerStep: 200,
  redisCpuUsPerStep: 100,
  clientCmdsPerStep: 10,
  redisCallsPerStep: 40,
  aofBytesPerStep: 4000,
  ...over,
});
const plain = {
  nodeCpuUsPerStep: 100,
  redisCpuUsPerStep: 50,
  clientCmdsPerStep: 8,
  redisCallsPerStep: 30,
  aofBytesPerStep: 2000,
};
const details = (engine: ReturnType<typeof round>) => {
  const kinds = {
    plain: [plain, plain, plain],
    engine: [engine, engine, engine],
    effects: [round(), round(), round()],
  };
  return { '1p': kinds, '2p': kinds };
};

describe('bench guard', () => {
  const baseline = figuresOf(details(round()));

  it('reads medians per procs and kind, CPU as a ratio to the plain chain', () => {
    expect(baseline['1p']!.engine).toMatchObject({ clientCmdsPerStep: 10, cpuRatio: 2, workerCpuUs: 200 });
  });

  it('passes the same tree, and a tree that got cheaper', () => {
    expect(compare(baseline, baseline)).toEqual([]);
    expect(compare(baseline, figuresOf(details(round({ clientCmdsPerStep: 8, nodeCpuUsPerStep: 150 }))))).toEqual([]);
  });

  it('fails a step that sends one more command, and CPU past its tolerance, naming each', () => {
    const now = figuresOf(
      details(round({ clientCmdsPerStep: 11, nodeCpuUsPerStep: 200 * (1 + TOLERANCE.cpuRatio) + 60 })),
    );
    const found = compare(baseline, now).filter((r) => r.where === 'engine 1p');
    expect(found.map((r) => r.figure)).toEqual(['clientCmdsPerStep', 'cpuRatio']);
    expect(found[0]).toMatchObject({ baseline: 10, now: 11, limit: 10.3 });
  });

  it('holds the Redis instruction ratio to 2 %, exact figures needing no wider tolerance', () => {
    const base = { redis: { engine: { redisInstrRatio: 1.176 } } };
    expect(compare(base, { redis: { engine: { redisInstrRatio: 1.19 } } })).toEqual([]);
    expect(compare(base, { redis: { engine: { redisInstrRatio: 1.21 } } })).toEqual([
      { where: 'engine redis', figure: 'redisInstrRatio', baseline: 1.176, now: 1.21, limit: 1.2 },
    ]);
  });

  it('records the lower CPU ratio of the baseline and a slower reading, the counts as read; raise records the reading', () => {
    const slower = figuresOf(details(round({ clientCmdsPerStep: 9, nodeCpuUsPerStep: 260 })));
    const { figures: kept, kept: left } = recordedFigures(baseline, slower, false);
    expect(kept['1p']!.engine).toMatchObject({ cpuRatio: 2, clientCmdsPerStep: 9, workerCpuUs: 260 });
    expect(left).toContainEqual({ where: 'engine 1p', figure: 'cpuRatio', kept: 2, reading: 2.4 });
    const raised = recordedFigures(baseline, slower, true);
    expect(raised.figures['1p']!.engine).toMatchObject({ cpuRatio: 2.4 });
    expect(raised.kept).toEqual([]);
    const faster = figuresOf(details(round({ nodeCpuUsPerStep: 150 })));
    expect(recordedFigures(baseline, faster, false).figures['1p']!.engine!.cpuRatio).toBe(1.667);
    expect(recordedFigures({}, slower, false).figures).toEqual(slower);
  });
});
