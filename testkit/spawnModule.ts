/** Spawns a project module as its own Node process (tsx loader when running from sources). */
import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..');
const fromSources = import.meta.url.endsWith('.ts');

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
  return spawn(process.execPath, moduleArgs(modulePath, opts.nodeArgs), {
    env: { ...process.env, ...env },
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
  return fromSources ? repoRoot : join(repoRoot, '..');
}

/** The absolute path of a project module as this process runs it: its source, or its compiled file under dist/. */
export function moduleFile(modulePath: string): string {
  return join(repoRoot, `${modulePath}${fromSources ? '.ts' : '.js'}`);
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
