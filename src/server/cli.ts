#!/usr/bin/env node
/**
 * The package's command (package.json "bin"): one name for every process of the fleet.
 *
 *   agent-fleet api|worker|reconciler [--agents <module>]   the HTTP API, a worker, the reconciler
 *   agent-fleet replay <runId> [--agents <module>] [...]      a run replayed offline (src/server/replay.ts)
 *   agent-fleet ctl <command> [...]                          the operator's command line (src/server/agentctl.ts)
 *
 * `--agents` sets AGENTS_MODULE for that process: a path (relative to the working directory, or
 * absolute) or a package name. A `.ts` agents module is loaded by Node's own type stripping
 * (Node 22.18 and later) as ES module: import its local files with their `.ts` extension.
 * Every other setting comes from the environment (docs/configuration.md).
 */
const ENTRY_POINTS = {
  api: './api.js',
  worker: './worker.js',
  reconciler: './reconciler.js',
  replay: './replay.js',
  ctl: './agentctl.js',
} as const;
type Command = keyof typeof ENTRY_POINTS;

const USAGE = 'usage: agent-fleet api|worker|reconciler|replay|ctl [--agents <module>] [arguments]';

function isCommand(name: string | undefined): name is Command {
  return name !== undefined && Object.hasOwn(ENTRY_POINTS, name);
}

/** Splits `--agents <m>` / `--agents=<m>` off the arguments: the rest go to the entry point as its own argv. */
function splitAgentsOption(args: readonly string[]): { agents?: string; rest: string[] } {
  const rest: string[] = [];
  let agents: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--agents') agents = args[++i];
    else if (arg.startsWith('--agents=')) agents = arg.slice('--agents='.length);
    else rest.push(arg);
  }
  return agents === undefined ? { rest } : { agents, rest };
}

/** A `.ts` module needs a Node that strips types itself; say so at once instead of a loader error. */
function typeStrippingProblem(agents: string): string | undefined {
  const typescript = (process.features as { typescript?: unknown }).typescript;
  if (!/\.[cm]?ts$/.test(agents) || (typescript !== undefined && typescript !== false)) return undefined;
  return (
    `--agents ${agents}: a TypeScript module needs Node 22.18 or later (this is ${process.version}); ` +
    'compile it to JavaScript (tsc) and pass the .js file'
  );
}

async function main(argv: readonly string[]): Promise<void> {
  const [command, ...args] = argv;
  if (!isCommand(command)) {
    process.stderr.write(`${USAGE}\n`);
    process.exit(command === undefined || command === '--help' || command === '-h' ? 0 : 2);
  }
  const { agents, rest } = splitAgentsOption(args);
  if (agents !== undefined) {
    if (agents === '') {
      process.stderr.write(`agent-fleet ${command}: --agents needs a module\n`);
      process.exit(2);
    }
    const problem = typeStrippingProblem(agents);
    if (problem) {
      process.stderr.write(`agent-fleet ${command}: cannot start: ${problem}\n`);
      process.exit(1);
    }
    // The entry point reads its configuration from the environment (src/config/config.ts) like any deployment.
    process.env.AGENTS_MODULE = agents;
  }
  const entry = new URL(ENTRY_POINTS[command], import.meta.url);
  // The entry points parse process.argv themselves (node:util parseArgs): they see their own arguments only.
  process.argv = [process.argv[0]!, entry.pathname, ...rest];
  await import(entry.href);
}

await main(process.argv.slice(2));
