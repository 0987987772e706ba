/** Spawns a project module as its own Node process (tsx loader when running from sources, unless SPAWN_COMPILED=1). */
import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { existsSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..');
const runsFromSources = import.meta.url.endsWith('.ts');
/**
 * SPAWN_COMPILED=1 (what `npm test` sets, right after building dist/): a process running from sources starts its
 * children from dist/ all the same. A worker booted through tsx spends about twice the CPU of its compiled file
 * before its first job (bench/bootCpu.ts), and the suite's e2e tier starts hundreds of processes on the two cores its
 * tests share. The children then run the code the image ships; `npm run worker` (launch 'npm')
 * still starts the sources as the README does.
 */
const compiledChildren = runsFromSources && process.env.SPAWN_COMPILED === '1';
const fromSources = runsFromSources && !compiledChildren;
/** Where compiled modules are: dist/ under the checkout, or this process's own tree when it runs from dist/. */
const compiledRoot = runsFromSources ? join(repoRoot, 'dist') : repoRoot;

/**
 * modulePath is relative to the repository root (or dist/), without extension, e.g. 'src/server/worker'.
 * `detached`: the child leads its own process group, as a command started from a terminal does; signal the
 * group with process.kill(-child.pid, signal) to do what Ctrl-C does. `nodeArgs`: flags for Node itself (e.g.
 * --cpu-prof, which NODE_OPTIONS does not take).
 */
export function spawnModule(
  modulePath: string,
  env: Record<string, string | undefined>,
  stdio: StdioOptions = 'inherit',
  opts: { detached?: boolean; nodeArgs?: string[] } = {},
): ChildProcess {
  const childEnv = { ...process.env, ...env };
  if (compiledChildren && childEnv.AGENTS_MODULE) childEnv.AGENTS_MODULE = compiledModule(childEnv.AGENTS_MODULE);
  return spawn(process.execPath, moduleArgs(modulePath, opts.nodeArgs), {
    env: childEnv,
    stdio,
    detached: opts.detached === true,
  });
}

/**
 * Node's arguments to run a project module the way this process runs: its compiled file when this process runs from
 * dist/ (as the image does, and the benchmarks, so they measure the code that ships), else its source through tsx.
 */
export function moduleArgs(modulePath: string, nodeArgs: string[] = []): string[] {
  const file = moduleFile(modulePath);
  return [...nodeArgs, ...(fromSources ? ['--import', 'tsx', file] : [file])];
}

/**
 * The checkout's root, where package.json and its scripts are, whether this process runs from sources or from dist/
 * (`npm run worker` starts a worker the way the README does).
 */
export function projectRoot(): string {
  return runsFromSources ? repoRoot : join(repoRoot, '..');
}

/** The absolute path of a project module as a child runs it: its source, or its compiled file under dist/. */
export function moduleFile(modulePath: string): string {
  if (fromSources) return join(repoRoot, `${modulePath}.ts`);
  const file = join(compiledRoot, `${modulePath}.js`);
  if (compiledChildren && !existsSync(file)) {
    throw new Error(`${file} is missing: SPAWN_COMPILED=1 starts children from dist/; run \`npm run build\` first`);
  }
  return file;
}

/**
 * A compiled child loads the compiled agents module too, so that it holds one copy of the engine (a source module
 * would need the tsx loader, and would bring the engine's sources beside dist/). A project module named by its source
 * (`test/fixtures/killLoopAgents.ts`, relative to the checkout) becomes its file under dist/; anything else, or one
 * with no compiled file, is as given.
 */
function compiledModule(agentsModule: string): string {
  const absolute = isAbsolute(agentsModule) ? agentsModule : join(repoRoot, agentsModule);
  if (!absolute.endsWith('.ts') || !absolute.startsWith(`${repoRoot}/`)) return agentsModule;
  const compiled = join(compiledRoot, `${absolute.slice(repoRoot.length + 1, -'.ts'.length)}.js`);
  // One that was never built (a test's module that does not exist) is the child's to refuse, as named.
  return existsSync(compiled) ? compiled : agentsModule;
}

/** Calls onLine with each complete line a child writes (its JSON log lines), across chunk boundaries. */
export function onLines(stream: NodeJS.ReadableStream, onLine: (line: string) => void): void {
  let buf = '';
  stream.on('data', (d: Buffer) => {
    buf += d.toString();
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      onLine(line);
    }
  });
}
