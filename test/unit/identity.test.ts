/** Ledger identity: from the run and the business action, never the attempt or the clock. */
import { describe, expect, it } from 'vitest';
import { actionIdentity } from '../../src/ledger/identity.js';
import type { WriteTool } from '../../src/core/tool.js';
import { ACTION_ID_FORMAT } from '../../src/store/keys.js';

const tool = (over: Partial<WriteTool> = {}) => ({ name: 'send_email', ...over }) as WriteTool;
const run = 'r_000000000000000000000001';

describe('actionIdentity', () => {
  it('the same write in the same run is the same action, whatever the key order', () => {
    const a = actionIdentity(run, tool(), { to: 'x@example.com', body: 'hi' });
    const b = actionIdentity(run, tool(), { body: 'hi', to: 'x@example.com' });
    expect(a).toEqual(b);
    expect(a.actionId).toMatch(ACTION_ID_FORMAT);
    expect(a.idempotencyKey).toMatch(new RegExp(`^${run}:send_email:[0-9a-f]{24}$`));
    expect(a.requestId).toMatch(/^rq_[0-9a-f]{24}$/);
  });

  it('another run, tool or argument is another action', () => {
    const a = actionIdentity(run, tool(), { to: 'x' });
    expect(actionIdentity('r_000000000000000000000002', tool(), { to: 'x' }).actionId).not.toBe(a.actionId);
    expect(actionIdentity(run, tool({ name: 'refund' }), { to: 'x' }).actionId).not.toBe(a.actionId);
    expect(actionIdentity(run, tool(), { to: 'y' }).actionId).not.toBe(a.actionId);
  });

  it('identity picks the identifying fields; material picks what an approval binds to', () => {
    const t = tool({
      identity: (x) => ({ order: (x as { order: string }).order }),
      material: (x) => ({ amount: (x as { amount: number }).amount }),
    });
    const a = actionIdentity(run, t, { order: 'o1', amount: 5, note: 'a' });
    const b = actionIdentity(run, t, { order: 'o1', amount: 5, note: 'b' });
    const c = actionIdentity(run, t, { order: 'o1', amount: 6, note: 'a' });
    expect(b).toEqual(a);
    expect(c.actionId).toBe(a.actionId);
    expect(c.fingerprint).not.toBe(a.fingerprint);
  });
});
