/**
 * The wait recorded on a parked run (src/runs/waits.ts): a child wait names every child of its step; one recorded
 * before a step could start several (its one child at the top) reads as a list of one, so such a run wakes as before.
 */
import { describe, expect, it } from 'vitest';
import { parseWait } from '../../src/runs/waits.js';

const a = 'r_' + 'a'.repeat(24);
const b = 'r_' + 'b'.repeat(24);

describe('parseWait', () => {
  it('reads a child wait on several children, in the order asked', () => {
    const children = [
      { runId: a, callId: 'call_1_0', tool: 'delegate' },
      { runId: b, callId: 'call_1_1', tool: 'delegate' },
    ];
    expect(parseWait(JSON.stringify({ kind: 'child', at: 5, step: 1, children }))).toEqual({
      kind: 'child',
      at: 5,
      step: 1,
      children,
    });
    expect(parseWait(JSON.stringify({ kind: 'child', at: 5, step: 1, children: [] }))).toBeUndefined();
  });

  it('reads a child wait of the one-child form as a list of one', () => {
    const old = { kind: 'child', at: 5, childRunId: a, step: 2, callId: 'call_2_0', tool: 'hand_off' };
    expect(parseWait(JSON.stringify(old))).toEqual({
      kind: 'child',
      at: 5,
      step: 2,
      children: [{ runId: a, callId: 'call_2_0', tool: 'hand_off' }],
    });
  });
});
