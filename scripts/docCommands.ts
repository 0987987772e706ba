/**
 * The shell commands of the docs, read and checked against the repository without running them: the README's and
 * docs/*.md's shell code blocks (bash, sh, shell, console) and the commands written inline in their prose
 * (a code span that starts with a command: `npm run bench -- --only=neighbour`). A command is checked by what it
 * names: an npm script exists in package.json and its arguments are ones its program reads; a file exists; a flag
 * is one the program parses; `agent-fleet` and `agentctl` commands exist with the options given; a setting
 * (`NAME=value` before a command, or alone in a block of settings) is in the configuration schema, the built-in
 * agents' settings or the agents module the command loads; a `curl` reaches a route of the API's OpenAPI document
 * with the method given. Commands that need what a test machine has not (docker, a cluster) are on a short list
 * with the reason, and only the files they name are checked.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

export interface DocCommand {
  /** The markdown file, relative to the repository. */
  file: string;
  line: number;
  /** The command as written (continuation lines joined, comments removed). */
  text: string;
  /** A fenced block's info string (`sh terminal=api`), or `inline` for a code span in prose. */
  where: string;
  /** The shell variables the command's block reads (`$RUN`): an assignment to one of them is not a setting. */
  reads?: string[];
}

/** What the commands are checked against: the repository as it is. */
export interface Repo {
  root: string;
  scripts: Record<string, string>;
  /** The package's own commands (package.json "bin"). */
  bins: string[];
  /** Every setting a deployment can give: the configuration schema's and the built-in agents'. */
  settings: Set<string>;
  /** `METHOD /path` of the API, paths as the OpenAPI document writes them (`/v1/runs/{id}`). */
  routes: string[];
  /** A route's JSON request body schema (the OpenAPI document's, its `$ref`s resolved by `schemas`). */
  bodies: Record<string, JsonSchema>;
  schemas: Record<string, JsonSchema>;
  /** agent-fleet's commands and each one's usage line. */
  cliUsage: Record<string, string>;
  /** agentctl's help text (every command with its options). */
  ctlHelp: string;
  /** The bench's section names (`npm run bench -- --only=...`). */
  benchSections: string[];
}

/** Programs a test machine does not run, each with the reason; only the files they name are checked. */
export const NOT_RUN: Record<string, string> = {
  docker: 'needs a Docker daemon; the image and compose files are built by test/deploy/deploy.test.ts where one is',
  kubectl: 'needs a Kubernetes cluster; the manifests are rendered by test/deploy (kustomize) where kubectl is',
  helm: 'needs a Kubernetes cluster',
  promtool: 'a Prometheus binary; the rules are tested by test/deploy where promtool is',
  git: 'clones from the network',
  'redis-server': 'a server the reader starts; the tests start their own (testkit/embeddedRedis.ts)',
  valgrind: 'a profiler the bench starts itself (bench/redisCost.ts)',
  callgrind_annotate: "valgrind's report of a file the bench kept",
  vllm: 'a model server on a GPU',
  ollama: 'a model server the reader installs',
};

/** Shell words that run nothing the repository defines: no check beyond the files they name. */
const SHELL = new Set([
  'cd', 'mkdir', 'sed', 'grep', 'sleep', 'until', 'while', 'do', 'done', 'then', 'fi', 'if', 'echo', 'export', 'cat',
  'jq', 'kill', 'wait', 'true', 'false', 'ls', 'rm', 'cp', 'mv', 'test', '[', 'set',
]); // prettier-ignore

/** npm's own commands the docs use (npm 11). */
const NPM_BUILTIN = new Set(['ci', 'install', 'i', 'init', 'pkg', 'pack', 'install-scripts', 'exec', 'help']);
/** npm's own flags a doc may put before the script's name (`npm run --silent openapi`: no npm lines in the output). */
const NPM_RUN_FLAGS = new Set(['--silent', '-s']);

const COMMAND_START =
  /^(?:[A-Z][A-Z0-9_]*=\S+\s+)*(?:npm|npx|node|tsx|agentctl|agent-fleet|curl|bash|docker|kubectl|helm|promtool|git|redis-server|valgrind|callgrind_annotate)\s/;

/** The shell commands of one markdown file: its shell blocks' commands, then its prose's inline commands. */
export function docCommands(file: string, markdown: string): DocCommand[] {
  const out: DocCommand[] = [];
  const lines = markdown.split('\n');
  let fence: { info: string; start: number; body: string[] } | undefined;
  // Prose with the fenced blocks blanked out (their lines kept, for the line numbers).
  const prose: string[] = [];
  for (const [i, line] of lines.entries()) {
    const open = /^```(.*)$/.exec(line);
    if (fence) {
      if (line.startsWith('```')) {
        if (/^(bash|sh|shell|console|zsh)\b/.test(fence.info)) out.push(...blockCommands(file, fence));
        fence = undefined;
      } else fence.body.push(line);
      prose.push('');
    } else if (open) {
      fence = { info: open[1]!.trim(), start: i + 2, body: [] };
      prose.push('');
    } else prose.push(line);
  }
  // A code span may wrap onto the next line (not past a blank one).
  const text = prose.join('\n');
  for (const m of text.matchAll(/`([^`]+)`/g)) {
    if (m[1]!.includes('\n\n')) continue;
    const span = m[1]!.replace(/\s*\n\s*/g, ' ').trim();
    const line = text.slice(0, m.index).split('\n').length;
    if (COMMAND_START.test(span)) out.push({ file, line, text: span, where: 'inline' });
  }
  return out;
}

function blockCommands(file: string, fence: { info: string; start: number; body: string[] }): DocCommand[] {
  const out: DocCommand[] = [];
  const consoleBlock = fence.info.startsWith('console');
  let pending: { line: number; text: string } | undefined;
  for (const [i, raw] of fence.body.entries()) {
    let line = raw;
    if (consoleBlock && !pending) {
      if (!line.startsWith('$ ')) continue; // output
      line = line.slice(2);
    }
    const text = stripComment(line);
    const cont = /\\\s*$/.test(text);
    const piece = cont ? text.replace(/\\\s*$/, '') : text;
    pending = pending
      ? { line: pending.line, text: `${pending.text} ${piece.trim()}` }
      : { line: fence.start + i, text: piece };
    if (cont) continue;
    if (pending.text.trim()) out.push({ file, line: pending.line, text: pending.text.trim(), where: fence.info });
    pending = undefined;
  }
  // A quoted value over several lines (a JSON setting) is one command: join lines while a quote is open.
  const reads = [...new Set([...fence.body.join('\n').matchAll(/\$\{?([A-Z][A-Z0-9_]*)/g)].map((m) => m[1]!))];
  return joinOpenQuotes(out).map((c) => ({ ...c, reads }));
}

function joinOpenQuotes(commands: DocCommand[]): DocCommand[] {
  const out: DocCommand[] = [];
  for (const c of commands) {
    const last = out.at(-1);
    if (last && quoteOpen(last.text)) last.text = `${last.text}\n${c.text}`;
    else out.push({ ...c });
  }
  return out;
}

function quoteOpen(text: string): boolean {
  let q: string | undefined;
  for (const ch of text) {
    if (q) {
      if (ch === q) q = undefined;
    } else if (ch === "'" || ch === '"') q = ch;
  }
  return q !== undefined;
}

/** A line without its `# comment` (a `#` outside quotes, at the start or after a space). */
function stripComment(line: string): string {
  let q: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (q) {
      if (ch === q) q = undefined;
    } else if (ch === "'" || ch === '"') q = ch;
    else if (ch === '#' && (i === 0 || /\s/.test(line[i - 1]!))) return line.slice(0, i).trimEnd();
  }
  return line;
}

/**
 * The simple commands of a command line, each as its words (quotes removed): split at `&&`, `||`, `;`, `|`, `&`
 * and new lines outside quotes; a `$(...)` is a command of its own, its place left as one word.
 */
export function simpleCommands(text: string): string[][] {
  const out: string[][] = [];
  const walk = (src: string): void => {
    let words: string[] = [];
    let word = '';
    let inWord = false;
    let q: string | undefined;
    const endWord = () => {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
    };
    const endCommand = () => {
      endWord();
      if (words.length) out.push(words);
      words = [];
    };
    for (let i = 0; i < src.length; i++) {
      const ch = src[i]!;
      if (q) {
        if (ch === q) q = undefined;
        else word += ch;
        continue;
      }
      if (ch === "'" || ch === '"') {
        q = ch;
        inWord = true;
      } else if (ch === '$' && src[i + 1] === '(') {
        let depth = 1;
        let j = i + 2;
        for (; j < src.length && depth > 0; j++) {
          if (src[j] === '(') depth++;
          else if (src[j] === ')') depth--;
        }
        walk(src.slice(i + 2, j - 1));
        word += '$(...)';
        inWord = true;
        i = j - 1;
      } else if (ch === '|' && !/\s/.test(src[i - 1] ?? ' ') && !/\s/.test(src[i + 1] ?? ' ')) {
        word += ch; // `approve|deny`: a synopsis's alternatives, not a pipe
      } else if (ch === '\n' || ch === ';' || ch === '|' || ch === '&') {
        if (ch === '&' && src[i + 1] === '>') word += ch;
        else {
          endCommand();
          if ((ch === '&' || ch === '|') && src[i + 1] === ch) i++;
        }
      } else if (/\s/.test(ch)) endWord();
      else {
        word += ch;
        inWord = true;
      }
    }
    endCommand();
  };
  walk(text);
  return out;
}

/** A command's words without its redirections (`> openapi.json`, `2>&1`): what it writes is not named. */
function withoutRedirections(words: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    if (/^\d?>>?$/.test(w)) i++;
    else if (!/^\d?>/.test(w)) out.push(w);
  }
  return out;
}

/** A usage synopsis's word that stands for a value: `<runId>`, `approve|deny`, `N`, `...`. */
const isPlaceholder = (w: string) => /[<>|]|\.\.\./.test(w);

/** The program reads this flag: its source names `--name`, reads it with flag('name') or parses it (parseArgs). */
export function readsFlag(source: string, name: string): boolean {
  const n = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return (
    new RegExp(`--${n}(?![\\w-])`).test(source) ||
    new RegExp(`\\w\\(\\s*['"]${n}['"]`).test(source) ||
    new RegExp(`(^|[\\s{,])'?${n}'?\\s*:\\s*\\{\\s*type:`, 'm').test(source)
  );
}

const namesFlag = (text: string, name: string) => new RegExp(`--${name}(?![\\w-])`).test(text);

/** The flags of a command's words, without values: `--only=a,b` is `only`; `[--limit` is `limit`. */
const flagsOf = (words: string[]) =>
  words.flatMap((w) => {
    const m = /^\[?--([a-z][\w-]*)/.exec(w);
    return m ? [m[1]!] : [];
  });

export interface JsonSchema {
  $ref?: string;
  type?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
}

/**
 * Why a JSON value does not fit a request schema: a field the schema does not have, a required one missing (objects,
 * all the way down; values' types and formats are the API's to check). Undefined when it fits.
 */
export function misfit(
  value: unknown,
  schema: JsonSchema,
  schemas: Record<string, JsonSchema>,
  at = 'body',
): string | undefined {
  if (schema.$ref) return misfit(value, schemas[schema.$ref.split('/').pop()!] ?? {}, schemas, at);
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives) {
    const reasons = alternatives.map((s) => misfit(value, s, schemas, at));
    return reasons.includes(undefined) ? undefined : reasons.join('; or ');
  }
  if (schema.allOf) return schema.allOf.map((s) => misfit(value, s, schemas, at)).find(Boolean);
  if (!schema.properties || typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const fields = value as Record<string, unknown>;
  const unknown = Object.keys(fields).find((k) => !Object.hasOwn(schema.properties!, k));
  if (unknown) return `${at}.${unknown}: not a field (${Object.keys(schema.properties).join(', ')})`;
  const missing = (schema.required ?? []).find((k) => !Object.hasOwn(fields, k));
  if (missing) return `${at}.${missing}: required`;
  for (const [k, v] of Object.entries(fields)) {
    const reason = misfit(v, schema.properties[k]!, schemas, `${at}.${k}`);
    if (reason) return reason;
  }
  return undefined;
}

export class DocChecker {
  constructor(private readonly repo: Repo) {}

  private exists(path: string): boolean {
    return existsSync(join(this.repo.root, path));
  }

  /** The benchmark's sections read their own settings: bench/run.ts runs them all. */
  private sectionsOf(source: string | undefined): string[] {
    if (source !== 'bench/run.ts') return [];
    return readdirSync(join(this.repo.root, 'bench/sections'))
      .filter((f) => f.endsWith('.ts'))
      .map((f) => `bench/sections/${f}`);
  }

  private source(path: string): string {
    return readFileSync(join(this.repo.root, path), 'utf8');
  }

  /** The problems of one doc command; none when every name in it exists. */
  check(command: DocCommand): string[] {
    const problems: string[] = [];
    const blockVars = new Set(command.reads ?? []);
    for (const words of simpleCommands(command.text)) problems.push(...this.checkWords(words, blockVars));
    return problems;
  }

  private checkWords(all: string[], shellVars: Set<string>): string[] {
    const words = withoutRedirections(all)
      .map((w) => w.replace(/^\[+|\]+$/g, ''))
      .filter((w) => w !== '');
    const settings: string[] = [];
    while (words.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[0]!)) settings.push(words.shift()!.split('=')[0]!);
    const problems: string[] = [];
    const program = words.length ? this.programOf(words) : undefined;
    for (const s of settings) {
      if (!/^[A-Z][A-Z0-9_]*$/.test(s)) continue; // a shell variable
      if (words.length === 0 && shellVars.has(s)) continue; // set here, read later in the same command
      if (this.repo.settings.has(s)) continue;
      const readers = [program?.source, ...this.sectionsOf(program?.source), this.agentsModule(all)].filter(
        (f): f is string => !!f && this.exists(f),
      );
      if (readers.some((f) => this.source(f).includes(s))) continue;
      problems.push(
        `setting ${s}: not in the configuration schema (src/config/config.ts)${readers.length ? ` nor read by ${readers.join(', ')}` : ''}`,
      );
    }
    if (words.length === 0) return problems;
    problems.push(...this.files(words));
    const [cmd, ...args] = words;
    if (SHELL.has(cmd!) || Object.hasOwn(NOT_RUN, cmd!)) return problems;
    switch (cmd) {
      case 'npm':
        return [...problems, ...this.npm(args)];
      case 'npx':
        return [...problems, ...this.npx(args)];
      case 'node':
      case 'tsx':
        return [...problems, ...this.node(cmd, args)];
      case 'bash':
      case 'sh':
        return problems; // the script's file is checked with the files
      case 'agent-fleet':
        return [...problems, ...this.agentFleet(args)];
      case 'agentctl':
        return [...problems, ...this.agentctl(args)];
      case 'curl':
        return [...problems, ...this.curl(args)];
      default:
        return [
          ...problems,
          `${cmd}: no check for this program (check it here, or list it in NOT_RUN with the reason)`,
        ];
    }
  }

  /** The repository files a command names: paths under the repository's own folders. */
  private files(words: string[]): string[] {
    const top = new Set(readdirSync(this.repo.root));
    const problems: string[] = [];
    for (const w of words) {
      const value = w.includes('=') && w.startsWith('-') ? w.slice(w.indexOf('=') + 1) : w;
      if (isPlaceholder(value) || /^[a-z]+:\/\//.test(value)) continue;
      const path = value.replace(/^\.\//, '').replace(/:.*$/, '');
      const first = path.split('/')[0]!;
      if (!path.includes('/') && !/\.(md|json|ya?ml|env|sh|ts)$/.test(path)) continue;
      if (first === 'dist') {
        // The build's output of a repository file (dist/bench/run.js: bench/run.ts); any other dist/ file is the
        // reader's own project's (getting started's dist/agents.js).
        const src = path.replace(/^dist\//, '').replace(/\.js$/, '.ts');
        if (top.has(src.split('/')[0]!) && src.includes('/') && !this.exists(src))
          problems.push(`file ${path}: built from ${src}, which does not exist`);
        continue;
      }
      if (!top.has(first) || first === 'node_modules') continue;
      if (!this.exists(path)) problems.push(`file ${path}: does not exist`);
    }
    return problems;
  }

  /** The program a command runs, as a source file of the repository (for its flags and settings). */
  private programOf(words: string[]): { source?: string } {
    const [cmd, a1, a2] = words;
    const file = (w?: string) =>
      w
        ? w
            .replace(/^\.\//, '')
            .replace(/^dist\//, '')
            .replace(/\.js$/, '.ts')
        : undefined;
    if (cmd === 'npm' && (a1 === 'run' || a1 === 'start' || a1 === 'test')) {
      const script = this.repo.scripts[a1 === 'run' ? a2! : a1];
      return script ? { source: this.scriptProgram(script) } : {};
    }
    if (cmd === 'npx' && a1 === 'tsx') return { source: file(a2) };
    if (cmd === 'npx' && a1 === 'vitest') return { source: words.find((w) => /\.test\.ts$/.test(w)) };
    if (cmd === 'node' || cmd === 'tsx') return { source: file(words.slice(1).find((w) => /\.[jt]s$/.test(w))) };
    if (cmd === 'agent-fleet' || (cmd === 'npx' && a1 === 'agent-fleet')) return { source: 'src/server/cli.ts' };
    return {};
  }

  /** The source file an npm script runs last (`npm run build && node dist/bench/run.js` -> bench/run.ts). */
  private scriptProgram(script: string): string | undefined {
    const files = [...script.matchAll(/(?:^|\s)(\S+\.(?:ts|js|sh))(?=\s|$)/g)].map((m) =>
      m[1]!.replace(/^dist\//, '').replace(/\.js$/, '.ts'),
    );
    return files.at(-1);
  }

  private npm(args: string[]): string[] {
    const [sub, ...rest] = args;
    if (sub === undefined) return ['npm: no command'];
    if (NPM_BUILTIN.has(sub)) return [];
    if (sub === 'run' || sub === 'run-script') while (rest[0] !== undefined && NPM_RUN_FLAGS.has(rest[0])) rest.shift();
    const name = sub === 'run' || sub === 'run-script' ? rest.shift() : sub;
    if (name === undefined) return ['npm run: no script named'];
    if (sub !== 'run' && sub !== 'run-script' && sub !== 'start' && sub !== 'test')
      return [`npm ${sub}: not an npm command the docs may use (add it to NPM_BUILTIN if it is npm's own)`];
    const script = this.repo.scripts[name];
    if (script === undefined) return [`npm run ${name}: no such script in package.json`];
    const dash = rest.indexOf('--');
    const extra = dash < 0 ? [] : rest.slice(dash + 1);
    if (dash < 0 && rest.length) return [`npm run ${name}: arguments after the script need \`--\` (${rest.join(' ')})`];
    return this.scriptArgs(name, script, extra);
  }

  /** The arguments given to an npm script, checked against the program it runs. */
  private scriptArgs(name: string, script: string, extra: string[]): string[] {
    // A script that is an npm script with arguments (bench:recovery) is checked as that command too.
    const problems = simpleCommands(script).flatMap((w) =>
      w[0] === 'npm' && w[1] === 'run' && w.includes('--') ? this.npm(w.slice(1)) : [],
    );
    if (extra.length === 0) return problems;
    const program = this.scriptProgram(script);
    if (program === 'src/server/agentctl.ts') return [...problems, ...this.agentctl(extra)];
    if (program === 'src/server/cli.ts') return [...problems, ...this.agentFleet(extra)];
    if (!program) return [...problems, `npm run ${name} -- ...: the script runs no file whose arguments can be read`];
    return [...problems, ...this.programArgs(program, extra)];
  }

  private programArgs(program: string, args: string[]): string[] {
    if (!this.exists(program)) return [`${program}: does not exist`];
    const source = this.source(program);
    const problems = flagsOf(args)
      .filter((f) => !readsFlag(source, f))
      .map((f) => `--${f}: ${program} reads no such flag`);
    if (program === 'bench/run.ts')
      for (const w of args) {
        const only = /^--only=(.*)$/.exec(w)?.[1];
        if (only === undefined || isPlaceholder(only)) continue;
        for (const s of only.split(','))
          if (!this.repo.benchSections.includes(s)) problems.push(`--only=${s}: no bench section named ${s}`);
      }
    return problems;
  }

  private npx(args: string[]): string[] {
    const [bin, ...rest] = args.filter((a) => a !== '--yes' && a !== '-y');
    if (bin === undefined) return ['npx: no command'];
    if (bin === 'agent-fleet') return this.agentFleet(rest);
    if (bin === 'tsx') return this.node('tsx', rest);
    if (bin === 'vitest')
      return rest.some((a) => /\.test\.ts$/.test(a)) || rest[0] === 'run'
        ? []
        : [`npx vitest ${rest.join(' ')}: no test file`];
    if (this.repo.bins.includes(bin) || this.exists(join('node_modules', '.bin', bin))) return [];
    return [`npx ${bin}: not a dependency's command (node_modules/.bin) nor the package's`];
  }

  private node(cmd: string, args: string[]): string[] {
    const i = args.findIndex((a) => /\.[jt]s$/.test(a));
    if (i < 0) return args.includes('-e') || args.includes('--input-type=module') ? [] : [`${cmd}: runs no file`];
    const program = args[i]!.replace(/^\.\//, '')
      .replace(/^dist\//, '')
      .replace(/\.js$/, '.ts');
    return this.programArgs(program, args.slice(i + 1));
  }

  private agentFleet(args: string[]): string[] {
    const [command, ...rest] = args;
    if (command === undefined || command === '--help' || command === '-h') return [];
    const usage = this.repo.cliUsage[command];
    if (usage === undefined) return [`agent-fleet ${command}: no such command (src/server/cliHelp.ts)`];
    if (command === 'ctl') return this.agentctl(rest);
    return flagsOf(rest)
      .filter((f) => f !== 'help' && !namesFlag(usage, f))
      .map((f) => `agent-fleet ${command} --${f}: not an option of the command (${usage})`);
  }

  private agentctl(args: string[]): string[] {
    const [command, ...rest] = args;
    if (command === undefined || command === '--help' || command === '-h') return [];
    const names = command.split('|');
    const lines = this.repo.ctlHelp.split('\n');
    const problems: string[] = [];
    for (const name of names) {
      const entries = lines.filter((l) => new RegExp(`^  (\\S+\\|)*${name}(\\|\\S+)*( |$)`).test(l));
      if (entries.length === 0) {
        problems.push(`agentctl ${name}: no such command (src/server/agentctl.ts HELP)`);
        continue;
      }
      const sub = rest.find((w) => !w.startsWith('-') && !isPlaceholder(w));
      const text = entries.join('\n');
      for (const f of flagsOf(rest))
        if (!['url', 'token', 'help'].includes(f) && !namesFlag(text, f))
          problems.push(`agentctl ${name}${sub ? ` ${sub}` : ''} --${f}: not an option of the command`);
    }
    return problems;
  }

  private curl(args: string[]): string[] {
    const url = args.find((a) => /^(https?:\/\/|\$\{?[A-Z_]+\}?\/|localhost:|127\.0\.0\.1:)/.test(a));
    if (!url) return ['curl: no URL of the API'];
    const path = url
      .replace(/^https?:\/\//, '')
      .replace(/^[^/]*/, '')
      .split('?')[0]!;
    const x = args.indexOf('-X');
    const method =
      x >= 0 ? args[x + 1]!.toUpperCase() : args.some((a) => a === '-d' || a === '--data') ? 'POST' : 'GET';
    const matches = (route: string) => {
      const [m, p] = route.split(' ');
      const pattern = new RegExp(`^${p!.replace(/\{[^}]+\}/g, '[^/]+')}$`);
      return m === method && pattern.test(path);
    };
    const route = this.repo.routes.find(matches);
    if (!route) return [`curl ${method} ${path}: no such route in the API's OpenAPI document`];
    const d = args.findIndex((a) => a === '-d' || a === '--data' || a === '--data-raw');
    if (d < 0) return [];
    let body: unknown;
    try {
      body = JSON.parse(args[d + 1]!);
    } catch {
      return [`curl ${route}: the body is not JSON`];
    }
    const schema = this.repo.bodies[route];
    const reason = schema ? misfit(body, schema, this.repo.schemas) : `${route} takes no JSON body`;
    return reason ? [`curl ${route}: ${reason}`] : [];
  }

  /** The agents module a command loads (AGENTS_MODULE=... or --agents ...). */
  private agentsModule(words: string[]): string | undefined {
    for (const [i, w] of words.entries()) {
      if (w.startsWith('AGENTS_MODULE=')) return w.slice('AGENTS_MODULE='.length);
      if (w === '--agents') return words[i + 1];
      if (w.startsWith('--agents=')) return w.slice('--agents='.length);
    }
    return undefined;
  }
}
