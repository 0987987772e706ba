/** One RunStatus list, one terminal set: the TypeScript and the Lua agree. */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { endsRun, isRunStatus, isTerminal, RUN_STATUSES, TERMINAL_STATUSES } from '../../src/core/status.js';

const luaDir = join(import.meta.dirname, '../../src/store/lua');

describe('run status', () => {
  it('isTerminal: completed, failed, budget_exceeded and cancelled, nothing else', () => {
    expect(RUN_STATUSES.filter((s) => isTerminal(s))).toEqual(['completed', 'failed', 'budget_exceeded', 'cancelled']);
    expect(isTerminal('needs_human')).toBe(false);
    expect(isTerminal('waiting_approval')).toBe(false);
    expect(isTerminal(null)).toBe(false);
    expect(isTerminal('nonsense')).toBe(false);
  });

  it('a run ends (for the finished-runs metric) when terminal or handed to a person', () => {
    expect(RUN_STATUSES.filter(endsRun)).toEqual([
      'needs_human',
      'completed',
      'failed',
      'budget_exceeded',
      'cancelled',
    ]);
  });

  it('isRunStatus knows the list', () => {
    expect(RUN_STATUSES.every(isRunStatus)).toBe(true);
    expect(isRunStatus('done')).toBe(false);
  });

  it("the Lua's terminal set (includes/runStatus.lua) equals TERMINAL_STATUSES", () => {
    const lua = readFileSync(join(luaDir, 'includes/runStatus.lua'), 'utf8');
    const table = /local terminalStatus = \{([^}]*)\}/.exec(lua)?.[1];
    expect(table).toBeDefined();
    const names = [...table!.matchAll(/(\w+) = true/g)].map((m) => m[1]);
    expect(new Set(names)).toEqual(new Set(TERMINAL_STATUSES));
  });

  it('no script spells its own status set: every user of terminalStatus includes runStatus', () => {
    for (const file of readdirSync(luaDir).filter((f) => f.endsWith('.lua'))) {
      const src = readFileSync(join(luaDir, file), 'utf8');
      expect(src, file).not.toMatch(/completed = true/);
      if (src.includes('terminalStatus')) expect(src, file).toMatch(/^-- @include runStatus$/m);
    }
  });
});
