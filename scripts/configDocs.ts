/**
 * The configuration reference (docs/configuration.md) generated from the configuration schema:
 * each setting's name, default and the doc comment written above it in src/config/config.ts.
 * `npm run docs:config` rewrites the table between the markers; test/unit/configDocs.test.ts fails
 * when the committed table and the schema differ, so the reference cannot drift from the code.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { configSchema } from '../src/config/config.js';

const root = fileURLToPath(new URL('..', import.meta.url));
export const CONFIG_SOURCE = `${root}src/config/config.ts`;
export const CONFIG_DOC = `${root}docs/configuration.md`;
const START = '<!-- generated from src/config/config.ts by `npm run docs:config`: do not edit by hand -->';
const END = '<!-- end of generated table -->';

interface Setting {
  name: string;
  defaultText: string;
  doc: string;
}

/** The doc comments above each property of `configSchema`'s object literal, by name. */
function docComments(source: string): Map<string, string> {
  const file = ts.createSourceFile('config.ts', source, ts.ScriptTarget.Latest, true);
  const docs = new Map<string, string>();
  const visit = (node: ts.Node): void => {
    if (ts.isVariableDeclaration(node) && node.name.getText(file) === 'configSchema') {
      const call = node.initializer;
      const literal = call && ts.isCallExpression(call) ? call.arguments[0] : undefined;
      if (literal && ts.isObjectLiteralExpression(literal)) {
        for (const prop of literal.properties) {
          const jsDoc = ts.getJSDocCommentsAndTags(prop).filter(ts.isJSDoc);
          const text = jsDoc.map((d) => ts.getTextOfJSDocComment(d.comment) ?? '').join(' ');
          docs.set(prop.name?.getText(file) ?? '', text.replace(/\s+/g, ' ').trim());
        }
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return docs;
}

/** A default as it would be written in the environment. */
function envForm(value: unknown): string {
  if (value === undefined) return 'unset';
  if (Array.isArray(value)) return value.length ? value.join(',') : 'empty';
  if (typeof value === 'object') return JSON.stringify(value);
  return typeof value === 'string' ? value : JSON.stringify(value);
}

export function settings(): Setting[] {
  const docs = docComments(readFileSync(CONFIG_SOURCE, 'utf8'));
  return Object.entries(configSchema.shape).map(([name, field]) => {
    const parsed = (field as { safeParse(v: unknown): { success: boolean; data?: unknown } }).safeParse(undefined);
    return { name, defaultText: parsed.success ? envForm(parsed.data) : 'required', doc: docs.get(name) ?? '' };
  });
}

const cell = (s: string): string => s.replace(/\|/g, '\\|');

export function renderTable(): string {
  const rows = settings().map((s) => `| \`${s.name}\` | ${cell(s.defaultText)} | ${cell(s.doc)} |`);
  return [START, '', '| setting | default | meaning |', '| --- | --- | --- |', ...rows, '', END].join('\n');
}

/** The document with its generated table replaced by the schema's. */
export function renderDoc(current: string): string {
  const from = current.indexOf(START);
  const to = current.indexOf(END);
  if (from < 0 || to < 0) throw new Error(`${CONFIG_DOC} lacks the generated-table markers`);
  return current.slice(0, from) + renderTable() + current.slice(to + END.length);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(CONFIG_DOC, renderDoc(readFileSync(CONFIG_DOC, 'utf8')));
}
