#!/usr/bin/env node
/**
 * The package's command (package.json "bin"): one name for every process of the fleet.
 *
 *   agent-fleet --help | <command> --help                    the commands; a command's options, settings, docs
 *   agent-fleet api|worker|reconciler [--agents <module>]   the HTTP API, a worker, the reconciler
 *   agent-fleet replay <runId> [--agents <module>] [...]      a run replayed offline (src/server/replay.ts)
 *   agent-fleet ctl <command> [...]                          the operator's command line (src/server/agentctl.ts)
 *
 * `--agents` sets AGENTS_MODULE for that process: a path (relative to the working directory, or
 * absolute) or a package name. A `.ts` agents module is loaded by Node's own type stripping
 * (Node 22.18 and later) as ES module: import its local files with their `.ts` extension.
 * Every other setting comes from the environment (docs/configuration.md).
 */
import { commandHelp, isCommand, mainHelp, type Command } from './cliHelp.js';
import { refuseUnsupportedNode } from './nodeVersion.js';

const ENTRY_POINTS: Record<Command, string> = {
  api: './api.js',
  worker: './worker.js',
  reconciler: './reconciler.js',
  replay: './replay.js',
  ctl: './agentctl.js',
};

/** A refusal of the command line: one line, exit 2. */
function refuse(message: string): never {
  process.stderr.write(`agent-fleet: ${message}\n`);
  process.exit(2);
}

/**
 * Splits `--agents <m>` / `--agents=<m>` off the arguments: the rest go to the entry point as its own argv. A
 * `--agents` with no module after it (the last argument, or another option next) is refused like `--agents=`.
 */
function splitAgentsOption(command: string, args: readonly string[]): { agents?: string; rest: string[] } {
  const rest: string[] = [];
  let agents: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--agents') {
      const next = args[i + 1];
      agents = next === undefined || next.startsWith('-') ? '' : next;
      if (agents !== '') i++;
    } else if (arg.startsWith('--agents=')) agents = arg.slice('--agents='.length);
    else rest.push(arg);
  }
  if (agents === '') refuse(`${command}: --agents needs a module (a path or a package name)`);
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

const wantsHelp = (args: readonly string[]) => args.includes('--help') || args.includes('-h');

async function main(argv: readonly string[]): Promise<void> {
  refuseUnsupportedNode('agent-fleet');
  const [command, ...args] = argv;
  if (command === '--help' || command === '-h') {
    process.stdout.write(`${mainHelp()}\n`);
    return;
  }
  if (!isCommand(command)) {
    process.stderr.write(`${mainHelp()}\n\n`);
    refuse(command === undefined ? 'no command given' : `unknown command '${command}'`);
  }
  // The help of a process that starts a fleet boots nothing; ctl prints its own (the list of its commands).
  if (command !== 'ctl' && wantsHelp(args)) {
    process.stdout.write(`${commandHelp(command)}\n`);
    return;
  }
  const { agents, rest } = splitAgentsOption(command, args);
  if (agents !== undefined) {
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
