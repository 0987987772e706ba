/** The Node version check every entry point runs at start, against package.json's engines range. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { satisfies, unsupportedNode } from '../../src/server/nodeVersion.js';

const engines = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    engines: { node: string };
  }
).engines.node;

describe('the Node version check', () => {
  it('accepts the versions engines names and refuses the others', () => {
    for (const v of ['v22.19.0', 'v22.20.1', 'v24.0.0', 'v24.21.0']) expect(satisfies(v, engines), v).toBe(true);
    for (const v of ['v20.18.0', 'v22.18.9', 'v23.11.0', 'v25.0.0', 'v18.0.0', 'nonsense'])
      expect(satisfies(v, engines), v).toBe(false);
  });

  it('refuses in one line naming this version and the supported ones', () => {
    const line = unsupportedNode('v20.18.0', engines)!;
    expect(line.split('\n')).toHaveLength(1);
    expect(line).toContain('v20.18.0');
    expect(line).toContain(engines);
    expect(unsupportedNode(process.version, engines)).toBeUndefined();
  });

  it('reads the other forms engines may use', () => {
    expect(satisfies('v22.3.0', '>=22.0.0')).toBe(true);
    expect(satisfies('v21.9.0', '>=22.0.0')).toBe(false);
    expect(satisfies('v24.5.0', '24.x')).toBe(true);
    expect(satisfies('v22.5.0', '24.x')).toBe(false);
  });
});
