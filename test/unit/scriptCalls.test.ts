/** A script-call layer: one typed wrapper per Lua file, and nothing else calls a script by name. */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectReply, replyCode, ScriptCode } from '../../src/store/codes.js';
import { FenceError } from '../../src/core/errors.js';

const src = join(import.meta.dirname, '../../src');
const walk = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );

describe('script calls', () => {
  it('every Lua file has its wrapper in src/store/calls/<name>.ts, which calls it', () => {
    for (const file of readdirSync(join(src, 'store/lua')).filter((f) => f.endsWith('.lua'))) {
      const name = file.replace(/-\d+\.lua$/, '');
      const wrapper = readFileSync(join(src, 'store/calls', `${name}.ts`), 'utf8');
      // A call inside a MULTI builds the command instead (scriptCommand); one whose arguments are one array sends
      // them by callScript; one whose reply is bytes, by scriptBytes.
      expect(wrapper, name).toMatch(
        new RegExp(`(script\\(\\w+, |scriptBytes\\(\\w+, |callScript\\(\\w+, |scriptCommand\\()'${name}'`),
      );
      expect(wrapper, name).toContain(file);
    }
  });

  it('no module outside src/store calls a script by name', () => {
    const callers = walk(src)
      .filter((f) => !relative(src, f).startsWith('store/'))
      .filter((f) =>
        /\b(script\([^)]*, '\w+'\)|scriptBytes\([^)]*, '\w+'\)|callScript\([^)]*, '\w+',)/.test(
          readFileSync(f, 'utf8'),
        ),
      );
    expect(callers.map((f) => relative(src, f))).toEqual([]);
  });

  it('one reply convention: a negative number, alone or first, is a code', () => {
    expect(replyCode(-2)).toBe(ScriptCode.StaleStep);
    expect(replyCode([-3, ''])).toBe(ScriptCode.RunMissing);
    expect(replyCode([1, 'x'])).toBeUndefined();
    expect(replyCode(['new', 'planned', 0])).toBeUndefined();
    expect(replyCode(5)).toBeUndefined();
    expect(() => expectReply([-1, 0], { step: 2 })).toThrow(FenceError);
    expect(expectReply([4, 0, 'running'])).toEqual([4, 0, 'running']);
  });
});
