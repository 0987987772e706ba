import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_DOC, renderDoc, settings } from '../../scripts/configDocs.js';

describe('the configuration reference', () => {
  it('documents every setting of the schema with a doc comment', () => {
    expect(
      settings()
        .filter((s) => !s.doc)
        .map((s) => s.name),
    ).toEqual([]);
  });

  it('is the table the schema generates (run `npm run docs:config` after changing a setting)', () => {
    const committed = readFileSync(CONFIG_DOC, 'utf8');
    expect(committed).toBe(renderDoc(committed));
  });
});
