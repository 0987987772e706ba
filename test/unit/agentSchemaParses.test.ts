import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/** Every .ts file under `dir`. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? sources(join(dir, d.name)) : d.name.endsWith('.ts') ? [join(dir, d.name)] : [],
  );
}

describe("the engine parses with an agent's schemas only through agentSafeParse", () => {
  it('no call of parse or safeParse on an agent, tool or webhook schema outside it (src/core/agentCode.ts)', () => {
    // What an agent's refinement throws is agent code's and must be marked (its message is never logged).
    const direct = /\b(agent|tool|hook)\.(input|args|body)\.(safeParse|parse|safeParseAsync|parseAsync)\(/;
    const found = sources('src')
      .filter((f) => !f.startsWith(join('src', 'agents')))
      .flatMap((f) =>
        readFileSync(f, 'utf8')
          .split('\n')
          .map((line, i) => ({ at: `${f}:${i + 1}`, line }))
          .filter(({ line }) => direct.test(line)),
      );
    expect(found).toEqual([]);
  });
});
