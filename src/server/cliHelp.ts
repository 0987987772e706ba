/**
 * The help of `agent-fleet` and of each of its commands: what it starts, its options, the settings it reads (names
 * and defaults taken from the configuration schema, so a renamed setting fails the help test, never drifts) and
 * where the docs are. Printing it boots nothing.
 */
import { configSchema } from '../config/config.js';
import { DEFAULT_TIMEOUT_MS, DEFAULT_URL } from './agentctlDefaults.js';

interface CommandHelp {
  summary: string;
  usage: string;
  options: string[];
  /** The settings this command's process reads first (every setting: docs/configuration.md). */
  settings: (keyof typeof configSchema.shape)[];
  docs: string[];
}

const STORE = ['REDIS_URL', 'REDIS_CLUSTER_NODES', 'REDIS_SENTINELS', 'REDIS_MIN_REPLICAS', 'KEY_PREFIX'] as const;
const AGENTS = ['AGENTS_MODULE', 'AGENTS_LOAD_TIMEOUT_MS'] as const;
const AGENTS_OPTION = '--agents <module>   the agents module (sets AGENTS_MODULE): a path or a package name';

export const COMMANDS = {
  api: {
    summary: 'the HTTP API: run intake, run views and events, operator routes, the console',
    usage: 'agent-fleet api [--agents <module>]',
    options: [AGENTS_OPTION],
    settings: [
      'APP_MODE',
      ...STORE,
      ...AGENTS,
      'PORT',
      'HOST',
      'PRODUCER_TOKEN',
      'OPERATOR_TOKEN',
      'TENANT_TOKENS',
      'WEBHOOK_SECRETS',
      'DEV_AUTH',
      'API_METRICS_PORT',
      'METRICS_TOKEN',
      'SHUTDOWN_GRACE_MS',
    ],
    docs: ['docs/http-api.md', 'docs/client.md', 'docs/security.md', 'docs/configuration.md'],
  },
  worker: {
    summary: "a worker: steps runs of the agents module's agents (SIGTERM hands its steps over)",
    usage: 'agent-fleet worker [--agents <module>]',
    options: [AGENTS_OPTION],
    settings: [
      'APP_MODE',
      ...STORE,
      ...AGENTS,
      'MODEL_PROVIDER',
      'WORKER_CONCURRENCY',
      'WORKER_METRICS_PORT',
      'SHUTDOWN_GRACE_MS',
      'FLOW_CONTROL',
      'APPROVAL_RULES',
    ],
    docs: ['docs/writing-an-agent.md', 'docs/operations.md', 'docs/configuration.md'],
  },
  reconciler: {
    summary: 'the reconciler: settles effects in doubt, finds stuck runs, archives ended ones',
    usage: 'agent-fleet reconciler [--agents <module>]',
    options: [AGENTS_OPTION],
    settings: [
      'APP_MODE',
      ...STORE,
      ...AGENTS,
      'RECONCILER_METRICS_PORT',
      'RECONCILER_SWEEP_MS',
      'RECONCILER_MIN_AGE_MS',
      'SHUTDOWN_GRACE_MS',
    ],
    docs: ['docs/operations.md', 'docs/configuration.md'],
  },
  replay: {
    summary: 'a run replayed offline from its journal (reads the store, changes nothing)',
    usage:
      'agent-fleet replay <runId> [--agents <module>] [--max-tokens N] [--max-steps N] [--max-attempts N] [--json]',
    options: [
      AGENTS_OPTION,
      '--max-tokens N, --max-steps N, --max-attempts N   limits of the replay',
      '--json   JSON output',
    ],
    settings: [...STORE, ...AGENTS],
    docs: ['docs/operations.md'],
  },
  ctl: {
    summary: "the operator's command line over the HTTP API (agent-fleet ctl --help lists its commands)",
    usage: 'agent-fleet ctl <command> [arguments] [--url URL] [--token TOKEN] [--timeout MS]',
    options: [
      `--url URL      the API (default: $AGENTCTL_URL, else ${DEFAULT_URL})`,
      '--token TOKEN  an operator token (default: $OPERATOR_TOKEN)',
      `--timeout MS   how long each request waits for an answer (default: $AGENTCTL_TIMEOUT_MS, else ${DEFAULT_TIMEOUT_MS})`,
    ],
    settings: [],
    docs: ['docs/operations.md', 'docs/client.md'],
  },
} satisfies Record<string, CommandHelp>;

export type Command = keyof typeof COMMANDS;

export function isCommand(name: string | undefined): name is Command {
  return name !== undefined && Object.hasOwn(COMMANDS, name);
}

/** Settings the schema leaves optional that a process still needs: the store (src/store/connect.ts refuses to start without one). */
const NEEDED: Partial<Record<keyof typeof configSchema.shape, string>> = {
  REDIS_URL: 'required (or REDIS_CLUSTER_NODES / REDIS_SENTINELS)',
};

/** A setting's default as written in the environment, or `unset` / `required`. */
function defaultOf(name: keyof typeof configSchema.shape): string {
  const needed = NEEDED[name];
  if (needed !== undefined) return needed;
  const parsed = (
    configSchema.shape[name] as { safeParse(v: unknown): { success: boolean; data?: unknown } }
  ).safeParse(undefined);
  if (!parsed.success) return 'required';
  const v = parsed.data;
  if (v === undefined) return 'unset';
  if (Array.isArray(v)) return v.length ? v.join(',') : 'empty';
  return typeof v === 'string' ? v : JSON.stringify(v);
}

export function commandHelp(command: Command): string {
  const c: CommandHelp = COMMANDS[command];
  const lines = [`usage: ${c.usage}`, '', c.summary, ''];
  if (c.options.length) lines.push('options:', ...c.options.map((o) => `  ${o}`), '  -h, --help   this help', '');
  if (command === 'ctl')
    lines.push('settings (of the shell, not of the fleet): AGENTCTL_URL, OPERATOR_TOKEN, AGENTCTL_TIMEOUT_MS', '');
  else {
    lines.push('settings it reads (environment; every one in docs/configuration.md):');
    for (const s of c.settings) lines.push(`  ${s.padEnd(24)} default: ${defaultOf(s)}`);
    lines.push('');
  }
  lines.push(`docs: ${c.docs.join(', ')}`);
  return lines.join('\n');
}

export function mainHelp(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((n) => n.length));
  return [
    'usage: agent-fleet <command> [--agents <module>] [arguments]',
    '',
    'commands:',
    ...Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`),
    '',
    'options:',
    `  ${AGENTS_OPTION}`,
    '  -h, --help   this help; agent-fleet <command> --help: that command, its options and settings',
    '',
    'Settings come from the environment: docs/configuration.md lists every one with its default.',
    'docs: README.md, docs/getting-started.md, docs/configuration.md, docs/operations.md',
  ].join('\n');
}
