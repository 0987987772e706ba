import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ARCHITECTURE_DOC, layers, renderDoc } from '../../scripts/layoutDocs.js';

describe("the architecture's Layout section", () => {
  it('is the block the dependency rules generate (run `npm run docs:layout` after changing a layer)', () => {
    const committed = readFileSync(ARCHITECTURE_DOC, 'utf8');
    expect(committed).toBe(renderDoc(committed));
  });

  it('names every folder of src/ once, in the layer order', () => {
    const folders = readdirSync(new URL('../../src/', import.meta.url), { withFileTypes: true })
      .filter((d) => d.isDirectory() && d.name !== 'types')
      .map((d) => d.name)
      .sort();
    expect(
      layers()
        .map((l) => l.folder)
        .sort(),
    ).toEqual(folders);
  });
});
