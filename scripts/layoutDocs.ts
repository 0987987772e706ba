/**
 * The Layout section of docs/architecture.md generated from the dependency rules (.dependency-cruiser.cjs): the
 * folders of src/ in their layer order, each with what it owns. `npm run docs:layout` rewrites the block between the
 * markers; test/unit/layoutDocs.test.ts fails when the committed block and the rules differ, so the picture of the
 * layout cannot drift from the rules that enforce it.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
export const ARCHITECTURE_DOC = `${root}docs/architecture.md`;
const START = '<!-- generated from .dependency-cruiser.cjs by `npm run docs:layout`: do not edit by hand -->';
const END = '<!-- end of generated layout -->';

interface Layer {
  folder: string;
  owns: string;
}

export function layers(): Layer[] {
  return (createRequire(import.meta.url)(`${root}.dependency-cruiser.cjs`) as { layers: Layer[] }).layers;
}

/** Highest first, as a reader walks down from the entry points; each folder imports only those below it. */
export function renderLayout(): string {
  const rows = layers()
    .slice()
    .reverse()
    .map((l) => `src/${l.folder.padEnd(11)} ${l.owns}`);
  return [START, '', '```', ...rows, '```', '', END].join('\n');
}

export function renderDoc(current: string): string {
  const from = current.indexOf(START);
  const to = current.indexOf(END);
  if (from < 0 || to < 0) throw new Error(`${ARCHITECTURE_DOC} lacks the generated-layout markers`);
  return current.slice(0, from) + renderLayout() + current.slice(to + END.length);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(ARCHITECTURE_DOC, renderDoc(readFileSync(ARCHITECTURE_DOC, 'utf8')));
}
