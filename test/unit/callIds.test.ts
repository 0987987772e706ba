/** src/core/callIds.ts: the tool calls of one answer, each with an id of its own. */
import { describe, expect, it } from 'vitest';
import { distinctCallIds } from '../../src/core/callIds.js';

type Part = { type: 'text' } | { type: 'call'; id: string; n: number };
const idOf = (p: Part) => (p.type === 'call' ? p.id : undefined);
const withId = (p: Part, id: string): Part => (p.type === 'call' ? { ...p, id } : p);
const call = (id: string, n: number): Part => ({ type: 'call', id, n });
const ids = (parts: Part[]) => parts.map((p) => (p.type === 'call' ? `${p.id}:${p.n}` : 'text'));

describe('distinctCallIds', () => {
  it('hands back the same array when every id is distinct and given', () => {
    const parts = [call('a', 1), { type: 'text' } as Part, call('b', 2)];
    expect(distinctCallIds(parts, idOf, withId)).toBe(parts);
  });

  it('keeps the first of a repeated id and names the others by their place; an empty id likewise', () => {
    const parts = [{ type: 'text' } as Part, call('a', 1), call('a', 2), call('', 3), call('a', 4)];
    expect(ids(distinctCallIds(parts, idOf, withId))).toEqual(['text', 'a:1', 'a~3:2', 'call~4:3', 'a~5:4']);
  });

  it("never takes another call's id: a made one that is given already grows a ~", () => {
    const parts = [call('a', 1), call('a', 2), call('a~2', 3)];
    expect(ids(distinctCallIds(parts, idOf, withId))).toEqual(['a:1', 'a~2~:2', 'a~2:3']);
  });
});
