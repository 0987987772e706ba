/**
 * A step job's data (src/runs/spec.ts safeParseStepJobData): the hand check of a commit's job data accepts exactly
 * what stepJobDataSchema accepts, with the same data, and hands the object back without a copy.
 */
import { describe, expect, it } from 'vitest';
import { safeParseStepJobData, stepJobDataSchema } from '../../src/runs/spec.js';

const common = { v: 1, runId: 'r_1', step: 3, used: { steps: 2, tokens: 220, contextBytes: 900 } };

const variants: unknown[] = [
  common,
  { ...common, used: { steps: 2, tokens: 220 } },
  { ...common, used: { steps: 0, tokens: 2 ** 60, contextBytes: 2 ** 60 } },
  { ...common, used: { steps: 2, tokens: 220, contextBytes: 900, extra: 1 } },
  { ...common, used: { steps: 2, contextBytes: 900, extra: 1 } },
  { ...common, used: { steps: 2, tokens: 220, other: 900 } },
  { ...common, used: { steps: 2 ** 53, tokens: 1 } },
  { ...common, used: { steps: -1, tokens: 1 } },
  { ...common, used: { steps: 1.5, tokens: 1 } },
  { ...common, used: { steps: 1, tokens: -0 } },
  { ...common, used: { steps: 1, tokens: 1.5 } },
  { ...common, used: { steps: 1, tokens: Infinity } },
  { ...common, used: { steps: 1, tokens: '1' } },
  { ...common, used: null },
  { ...common, used: [1, 2] },
  { ...common, step: 0 },
  { ...common, step: -0 },
  { ...common, step: 1.5 },
  { ...common, step: 2 ** 53 },
  { ...common, step: '3' },
  { ...common, v: 2 },
  { ...common, runId: 5 },
  { ...common, extra: true },
  { ...common, resume: true },
  { ...common, wake: true },
  { ...common, outageSince: 5 },
  { ...common, limits: { maxSteps: 5, maxTokens: 100, maxWallMs: 1000, deadlineAt: 10 } },
  JSON.parse('{"v":1,"runId":"r","step":1,"used":{"steps":0,"tokens":0},"__proto__":{"x":1}}'),
  { v: 1, runId: 'r', step: 1 },
  null,
  [],
  'data',
  Object.assign(Object.create({ inherited: 1 }), common),
];

describe('safeParseStepJobData', () => {
  it('accepts and rejects what the schema does, with the same data', () => {
    for (const raw of variants) {
      const fast = safeParseStepJobData(raw);
      const schema = stepJobDataSchema.safeParse(raw);
      expect(fast.success, JSON.stringify(raw)).toBe(schema.success);
      if (fast.success && schema.success) expect(fast.data).toEqual(schema.data);
    }
  });

  it("a commit's job data is handed back as it is, not copied", () => {
    const raw = structuredClone(common);
    const parsed = safeParseStepJobData(raw);
    expect(parsed.success && parsed.data).toBe(raw);
  });
});
