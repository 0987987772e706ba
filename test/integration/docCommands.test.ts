/**
 * Every shell command of the README and docs/*.md, checked against the repository (scripts/docCommands.ts):
 * the npm scripts, files, flags, settings, `agent-fleet` / `agentctl` commands and API routes it names exist.
 * `agent-fleet`'s and agentctl's commands and options are read from their help, run for real (`agent-fleet --help`,
 * `agent-fleet <command> --help`, `agent-fleet ctl --help`: each exits 0 and boots nothing).
 * docs/getting-started.md's blocks are also run as written, against a started fleet, by
 * test/e2e/packedPackage.test.ts.
 */
import { execFile } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { promisify } from 'node:util';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { configSchema } from '../../src/config/config.js';
import { supportSettings } from '../../src/agents/support/settings.js';
import { AgentCatalog } from '../../src/core/agent.js';
import { supportAgent } from '../../src/agents/support/index.js';
import { openApiDocument, OPENAPI_PATH } from '../../src/http/openapi.js';
import { COMMANDS } from '../../src/server/cliHelp.js';
import { sections } from '../../bench/sections/index.js';
import {
  DocChecker,
  docCommands,
  NOT_RUN,
  simpleCommands,
  type DocCommand,
  type JsonSchema,
  type Repo,
} from '../../scripts/docCommands.js';
import { moduleArgs } from '../../testkit/spawnModule.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  scripts: Record<string, string>;
  bin: Record<string, string>;
};
const DOCS = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/**
 * agentctl's help, from `agent-fleet ctl --help` run as the package runs it (src/server/cli.ts): it exits 0 and
 * boots nothing. (agent-fleet's own commands and usage lines are its help's source, src/server/cliHelp.ts;
 * test/e2e/cli.test.ts runs each `agent-fleet <command> --help`.)
 */
async function ctlHelp(): Promise<string> {
  const { stdout } = await promisify(execFile)(process.execPath, [...moduleArgs('src/server/cli'), 'ctl', '--help'], {
    cwd: root,
    timeout: 50_000,
  });
  return stdout;
}

function repo(ctl: string): Repo {
  const document = openApiDocument(new AgentCatalog([supportAgent({ baseUrl: 'http://127.0.0.1' })]));
  type Operation = { requestBody?: { content?: Record<string, { schema?: JsonSchema }> } };
  const operations = Object.entries(document.paths ?? {}).flatMap(([path, ops]) =>
    Object.entries(ops as Record<string, Operation>).map(([m, op]) => ({ route: `${m.toUpperCase()} ${path}`, op })),
  );
  const routes = operations.map((o) => o.route);
  const bodies = Object.fromEntries(
    operations.flatMap(({ route, op }) => {
      const schema = op.requestBody?.content?.['application/json']?.schema;
      return schema ? [[route, schema]] : [];
    }),
  );
  return {
    root,
    scripts: pkg.scripts,
    bins: Object.keys(pkg.bin),
    settings: new Set([
      ...Object.keys(configSchema.shape),
      ...Object.keys(supportSettings({ config: { APP_MODE: 'development' } }).shape),
    ]),
    routes: [...routes, `GET ${OPENAPI_PATH}`],
    bodies,
    schemas: (document.components?.schemas ?? {}) as Record<string, JsonSchema>,
    cliUsage: Object.fromEntries(Object.entries(COMMANDS).map(([name, c]) => [name, c.usage])),
    ctlHelp: ctl,
    benchSections: sections.map((s) => s.name),
  };
}

let checker: DocChecker;
const commands: DocCommand[] = DOCS.flatMap((f) => docCommands(f, readFileSync(join(root, f), 'utf8')));
const doc = (text: string, where = 'bash'): DocCommand => ({ file: 'planted.md', line: 1, text, where });

beforeAll(async () => {
  const help = await ctlHelp();
  expect(help).toMatch(/^usage: agentctl <command>/);
  checker = new DocChecker(repo(help));
}, 60_000);

describe('the commands of the docs', () => {
  it('finds the shell blocks and the inline commands of every doc', () => {
    expect(commands.length).toBeGreaterThan(100);
    const where = new Set(commands.map((c) => c.where));
    expect(where).toContain('inline');
    expect(where).toContain('sh terminal=worker');
    expect(commands.map((c) => c.file)).toEqual(expect.arrayContaining(['README.md', 'docs/getting-started.md']));
  });

  it('name only scripts, files, flags, settings, commands and routes that exist', () => {
    const problems = commands.flatMap((c) => checker.check(c).map((p) => `${c.file}:${c.line}: ${c.text}\n    ${p}`));
    expect(problems).toEqual([]);
  });

  it('leave out only the programs this machine cannot run, each with its reason', () => {
    const programs = new Set(
      commands.flatMap((c) => simpleCommands(c.text).map((w) => w.find((x) => !/^[A-Z][A-Z0-9_]*=/.test(x)))),
    );
    for (const p of Object.keys(NOT_RUN)) expect(NOT_RUN[p]!.length).toBeGreaterThan(10);
    expect([...programs].filter((p) => p && Object.hasOwn(NOT_RUN, p)).sort()).toEqual(
      expect.arrayContaining(['docker', 'kubectl']),
    );
  });
});

describe('the doc command check, on planted mistakes', () => {
  const problems = (text: string, where?: string) => checker.check(doc(text, where));

  it('accepts what exists', () => {
    expect(problems('npm run bench -- --only=neighbour,flowcost --rounds=3')).toEqual([]);
    expect(problems('REDIS_URL=redis://127.0.0.1:6379 npx agent-fleet worker --agents ./dist/agents.js')).toEqual([]);
    expect(problems('npm run ctl -- retry r_1 --steps 5')).toEqual([]);
    expect(problems(`curl -X POST $API/v1/events -d '{"tenant":"acme","agent":"a","key":"k","payload":{}}'`)).toEqual(
      [],
    );
    expect(problems('npx tsx test/e2e/failover/campaign.ts --replicas=1 --lag --kills=2')).toEqual([]);
  });

  it('a script that does not exist', () => {
    expect(problems('npm run bench:nope')).toEqual([expect.stringContaining('no such script')]);
  });

  it('a bench section or a flag the program does not read', () => {
    expect(problems('npm run bench -- --only=neighbor')).toEqual([expect.stringContaining('no bench section')]);
    expect(problems('npm run build && node dist/bench/redisCost.js --chainz=5')).toEqual([
      expect.stringContaining('--chainz'),
    ]);
    expect(problems('npx tsx bench/run.ts --only=neighbour --fast')).toEqual([expect.stringContaining('--fast')]);
  });

  it('a file that does not exist', () => {
    expect(problems('docker compose -f deploy/compose.nope.yml up')).toEqual([
      expect.stringContaining('deploy/compose.nope.yml'),
    ]);
    expect(problems('npx vitest run test/unit/nope.test.ts')).toEqual([expect.stringContaining('test/unit/nope')]);
    expect(problems('npm run build && node dist/bench/nope.js')).toEqual(
      expect.arrayContaining([expect.stringContaining('bench/nope.ts')]),
    );
  });

  it('a setting that is not in the schema', () => {
    expect(problems('FLOW_CONTROLS=false npm run worker')).toEqual([expect.stringContaining('FLOW_CONTROLS')]);
    expect(problems("TENANT_MODEL='{}'")).toEqual([expect.stringContaining('TENANT_MODEL')]);
    // A module's own setting, read by the agents module the command loads.
    expect(problems('AGENTS_MODULE=examples/lead-qualifier/index.ts CRM_URL=http://x npm run api')).toEqual([]);
  });

  it('a command or an option agent-fleet and agentctl do not have', () => {
    expect(problems('npx agent-fleet wroker')).toEqual([expect.stringContaining('no such command')]);
    expect(problems('agent-fleet worker --agent ./a.js')).toEqual([expect.stringContaining('--agent')]);
    expect(problems('agentctl runz')).toEqual([expect.stringContaining('no such command')]);
    expect(problems('agentctl retry r_1 --weight 2')).toEqual([expect.stringContaining('--weight')]);
  });

  it('a route the API does not serve', () => {
    expect(problems('curl -X DELETE http://127.0.0.1:3000/v1/runs')).toEqual([
      expect.stringContaining('no such route'),
    ]);
  });

  it('a program with no check and no reason', () => {
    expect(problems('make install')).toEqual([expect.stringContaining('no check for this program')]);
  });
});
