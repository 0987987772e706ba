/** Shares of the live event streams, without Redis or HTTP: per principal, the operators' reserve, the whole. */
import { describe, expect, it } from 'vitest';
import { ViewerShares, type ViewerSlot } from '../../src/http/operators/viewerShares.js';
import type { Principal } from '../../src/http/auth.js';

const tenant = (name: string): Principal => ({ role: 'tenant', tenant: name });
const operator = (name: string): Principal => ({
  role: 'operator',
  operator: { name, role: 'operator', tenants: '*' },
});

function take(shares: ViewerShares, p: Principal, n: number): ViewerSlot[] {
  const slots: ViewerSlot[] = [];
  for (let i = 0; i < n; i++) {
    const s = shares.admit(p);
    if (typeof s === 'string') throw new Error(`refused at ${i}: ${s}`);
    slots.push(s);
  }
  return slots;
}

describe('ViewerShares', () => {
  it('names the most specific limit: the principal, then the reserve, then the whole', () => {
    const shares = new ViewerShares({ maxViewers: 6, perPrincipal: 3, operatorReserve: 2 });
    take(shares, tenant('a'), 3);
    expect(shares.admit(tenant('a'))).toBe('SSE_MAX_VIEWERS_PER_PRINCIPAL');
    take(shares, { role: 'producer' }, 1);
    expect(shares.admit(tenant('b'))).toBe('SSE_OPERATOR_RESERVE');
    take(shares, operator('alice'), 2);
    expect(shares.admit(operator('bob'))).toBe('SSE_MAX_VIEWERS');
    expect(shares.viewers).toBe(6);
  });

  it('a released slot is given back once, however often it is released', () => {
    const shares = new ViewerShares({ maxViewers: 4, perPrincipal: 2, operatorReserve: 1 });
    const [first] = take(shares, tenant('a'), 2);
    first!.release();
    first!.release();
    expect(shares.heldBy(tenant('a'))).toBe(1);
    expect(shares.viewers).toBe(1);
    take(shares, tenant('a'), 1);
    expect(shares.admit(tenant('a'))).toBe('SSE_MAX_VIEWERS_PER_PRINCIPAL');
  });

  it('operators are principals by name: one operator at its share does not stop another', () => {
    const shares = new ViewerShares({ maxViewers: 10, perPrincipal: 2, operatorReserve: 5 });
    take(shares, operator('alice'), 2);
    expect(shares.admit(operator('alice'))).toBe('SSE_MAX_VIEWERS_PER_PRINCIPAL');
    take(shares, operator('bob'), 2);
  });
});
