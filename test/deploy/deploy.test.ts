/**
 * The deployment files, checked offline with the tools that will read them:
 * - Dockerfile (dockerfile-utils' validator) and .dockerignore;
 * - docker-compose.yml (structure, plus `docker-compose config` from Debian);
 * - Prometheus config and alert rules (`promtool check config|rules`, `promtool test rules`);
 * - the Grafana dashboard (its PromQL through `promtool check rules`);
 * - every Kubernetes manifest against the Kubernetes OpenAPI schemas shipped by
 *   `kubernetes-models` (+ `@kubernetes-models/prometheus-operator` for the CRDs), with unknown
 *   fields rejected, and the kustomization rendered by `kubectl kustomize`.
 *
 * A missing tool fails its test with a message naming scripts/ci-deps.sh (CI runs it); nothing
 * is skipped. `UPDATE_PROMETHEUSRULE=1 npx vitest run test/deploy/deploy.test.ts` regenerates
 * k8s/base/prometheusrule.yaml from deploy/prometheus/rules.yml.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { configSchema, loadConfig, type Config } from '../../src/config/config.js';
import { ConfigError } from '../../src/core/errors.js';
import { parseAgentSettings } from '../../src/config/agentsModule.js';
import { supportSettings } from '../../src/agents/support/settings.js';

 
type Obj = Record<string, any>;

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const rel = (...p: string[]) => path.join(ROOT, ...p);
const read = (...p: string[]) => readFileSync(rel(...p), 'utf8');
const CI_DEPS = 'run `bash scripts/ci-deps.sh` (CI runs it before npm test)';
const TOOL_TIMEOUT_MS = 60_000;
/** The production kustomization, and the development overlay (sandbox, scripted model, demo secrets). */
const K8S_BASE = 'k8s/base';
const K8S_DEV = 'k8s/overlays/dev';

// ---------------------------------------------------------------------------------------------
// Facts the files must agree on

/** The four processes of the image and their entry points (Dockerfile, compose, k8s). */
const ENTRYPOINTS = {
  api: 'dist/src/server/api.js',
  worker: 'dist/src/server/worker.js',
  reconciler: 'dist/src/server/reconciler.js',
  sandbox: 'dist/sandbox/main.js',
} as const;

/** Metric names the app exports; alerts and panels may use only these. */
const METRICS = new Set([
  'agent_spend_total',
  'agent_spend_limit_micros',
  'agent_duplicate_writes_total',
  'agent_ledger_dedupe_hits_total',
  'agent_effects_total',
  'agent_service_rejections_total',
  'agent_store_refusals_total',
  'agent_late_receipts_total',
  'agent_outcome_unknown_open',
  'agent_outcome_unknown_oldest_age_seconds',
  'agent_human_queue_depth',
  'agent_human_items_expired_total',
  'agent_human_queue_oldest_age_seconds',
  'agent_approvals_pending',
  'agent_budget_stops_total',
  'agent_loop_stops_total',
  'agent_steps_started_total',
  'agent_steps_committed_total',
  'agent_step_duration_seconds',
  'agent_stall_recoveries_total',
  'agent_sigterm_handoffs_total',
  'agent_model_waits_total',
  'agent_queue_jobs',
  'agent_runs_by_status',
  'agent_redis_config_ok',
  'agent_runs_finished_total',
  'agent_version_parked_runs',
  'agent_version_handbacks_total',
  'agent_version_decisions_total',
  'agent_flow_oldest_waiting_seconds',
  'agent_flow_waiting_runs',
  'agent_flow_held_runs',
  'agent_flow_admitted_total',
  'agent_runs_refused_total',
  'agent_rate_limit_waits_total',
  'agent_model_rate_limited_total',
  'agent_tool_source_up',
  'agent_tool_source_reconnects',
  'agent_tool_schemas_refused',
  'agent_archived_runs_total',
  'agent_archive_failures_total',
  'agent_archive_lag_seconds',
  'agent_compaction_lag_seconds',
  'agent_compactions_total',
  'agent_erasures_total',
  'agent_schedule_ticks_total',
  'agent_reconciler_sweeps_total',
  'agent_sweep_action_failures_total',
  'agent_compensations_unsettled_total',
  'agent_stuck_run_sweep_failures_total',
  'agent_operator_auth_failures_total',
  'agent_scrape_collect_errors_total',
]);
const HISTOGRAMS = new Set(['agent_step_duration_seconds']);

/**
 * After SIGTERM the worker waits up to SHUTDOWN_GRACE_MS for in-flight effects, then exits on its
 * own at the latest this much later (src/server/worker.ts). SIGKILL must come after that.
 */
const WORKER_HARD_EXIT_MARGIN_MS = 3000;

/** Required alerts and the metric each one must be written against. */
const ALERTS: Record<string, string[]> = {
  AgentDuplicateWrite: ['agent_duplicate_writes_total'],
  AgentOutcomeUnknownStale: ['agent_outcome_unknown_oldest_age_seconds'],
  AgentHumanQueueGrowing: ['agent_human_queue_depth'],
  AgentBudgetStopSpike: ['agent_budget_stops_total'],
  AgentLoopStops: ['agent_loop_stops_total'],
  AgentStalledJobs: ['agent_stall_recoveries_total'],
  AgentNoProgress: ['agent_queue_jobs', 'agent_steps_committed_total'],
  AgentRedisConfigUnsafe: ['agent_redis_config_ok'],
  AgentRunsLost: ['agent_runs_finished_total'],
  AgentFailedRunsRising: ['agent_runs_finished_total'],
  AgentVersionQueueWaiting: ['agent_version_parked_runs'],
  AgentTenantStarved: ['agent_flow_oldest_waiting_seconds'],
  AgentTenantLineFull: ['agent_runs_refused_total'],
  AgentModelRateLimited: ['agent_model_rate_limited_total'],
  AgentToolSourceDown: ['agent_tool_source_up'],
  AgentTenantSpendNearLimit: ['agent_spend_total', 'agent_spend_limit_micros'],
  AgentFleetSpendRate: ['agent_spend_total', 'agent_spend_limit_micros'],
  AgentArchiveLagging: ['agent_archive_lag_seconds'],
  AgentCompactionLagging: ['agent_compaction_lag_seconds'],
  AgentArchiveFailing: ['agent_archive_failures_total'],
  AgentScheduleTicksFailing: ['agent_schedule_ticks_total'],
  AgentReconcilerFailing: ['agent_reconciler_sweeps_total'],
  AgentSweepActionsFailing: ['agent_sweep_action_failures_total'],
  AgentRunRecordsUndecodable: ['agent_stuck_run_sweep_failures_total'],
  AgentScrapeGaugesStale: ['agent_scrape_collect_errors_total'],
  AgentServiceCredentialsRefused: ['agent_service_rejections_total'],
  AgentCompensationUnsettled: ['agent_compensations_unsettled_total'],
  AgentLateReceiptUnrecorded: ['agent_late_receipts_total'],
  AgentHumanItemExpired: ['agent_human_items_expired_total'],
  AgentOidcUnavailable: ['agent_operator_auth_failures_total'],
  AgentStoreFull: ['agent_store_refusals_total'],
};

/** Environment the processes read that is not in src/config/config.ts (read by other entry points). */
const EXTRA_ENV = new Set([
  'RECONCILER_METRICS_PORT',
  'BULL_BOARD_USER',
  'BULL_BOARD_PASSWORD',
  'SANDBOX_HOST',
  'SANDBOX_PORT',
  'SANDBOX_SEED',
  'NODE_ENV',
  'NODE_OPTIONS',
]);
/** The built-in agents module's own settings (the support agent's vendors), as the processes parse them. */
const agentSettings = (cfg: Config, env: Record<string, string | undefined>) => parseAgentSettings(supportSettings, cfg, env);
const KNOWN_ENV = new Set([...Object.keys(configSchema.shape), ...Object.keys(supportSettings({ config: { APP_MODE: 'development' } }).shape), ...EXTRA_ENV]);

// ---------------------------------------------------------------------------------------------
// Helpers

function findOnPath(cmd: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, cmd);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

function requireTool(cmd: string, what: string): string {
  const found = findOnPath(cmd);
  if (!found) throw new Error(`${cmd} (${what}) is not on PATH: ${CI_DEPS}`);
  return found;
}

function run(cmd: string, args: string[], cwd = ROOT): { status: number | null; out: string } {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout: TOOL_TIMEOUT_MS, env: { ...process.env, NO_COLOR: '1' } });
  if (r.error) throw r.error;
  return { status: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

function expectSuccess(cmd: string, args: string[], cwd = ROOT): string {
  const r = run(cmd, args, cwd);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}:\n${r.out}`);
  return r.out;
}

async function importPackage<T>(name: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (err) {
    throw new Error(
      `npm package ${name} is missing (${(err as Error).message}). It is a devDependency of this project: ` +
        `run \`npm ci\` (or ${CI_DEPS})`,
    );
  }
}

function yamlDocs(file: string): Obj[] {
  const docs = parseAllDocuments(read(file));
  const out: Obj[] = [];
  for (const d of docs) {
    if (d.errors.length) throw new Error(`${file}: ${d.errors.map((e) => e.message).join('; ')}`);
    const v = d.toJS({ maxAliasCount: 100 }) as unknown;
    if (v !== null && v !== undefined) out.push(v);
  }
  return out;
}

/** Go-style durations as Docker Compose writes them: 30s, 1m30s, 500ms, 1h. */
function durationMs(text: string): number {
  const re = /(\d+(?:\.\d+)?)(ms|us|ns|h|m|s)/g;
  const unit: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 0.001, ns: 0.000001 };
  let total = 0;
  let consumed = '';
  for (const m of text.matchAll(re)) {
    total += Number(m[1]) * (unit[m[2] as string] as number);
    consumed += m[0];
  }
  if (consumed !== text || consumed === '') throw new Error(`not a duration: ${text}`);
  return total;
}

function metricNames(expr: string): string[] {
  return [...expr.matchAll(/\bagent_[a-z0-9_]+\b/g)].map((m) => m[0]);
}

function baseMetric(name: string): string {
  for (const h of HISTOGRAMS) if (name === `${h}_bucket` || name === `${h}_sum` || name === `${h}_count`) return h;
  return name;
}

function shellWords(cmd: unknown): string[] {
  if (Array.isArray(cmd)) return cmd.map(String);
  if (typeof cmd === 'string') return cmd.split(/\s+/).filter(Boolean);
  return [];
}

const labelsMatch = (selector: Obj | undefined, labels: Obj | undefined) =>
  !!selector && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels?.[k] === v);

// ---------------------------------------------------------------------------------------------
// Dockerfile

describe('Dockerfile', () => {
  const dockerfile = read('Dockerfile');
  const lines = dockerfile
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const stages: string[][] = [];
  for (const l of lines) {
    if (/^FROM\s/i.test(l)) stages.push([]);
    stages[stages.length - 1]?.push(l);
  }
  const final = stages[stages.length - 1] ?? [];

  it('passes the dockerfile-utils validator with no diagnostic', async () => {
    const du = await importPackage('dockerfile-utils', () => import('dockerfile-utils'));
    const diagnostics = du.validate(dockerfile);
    expect(diagnostics.map((d) => `line ${d.range.start.line + 1}: ${d.message}`)).toEqual([]);
  });

  it('builds with npm ci && npm run build on Node 24 (the newer LTS) and keeps the runtime stage lean', () => {
    expect(lines.find((l) => /^ARG NODE_IMAGE=/.test(l))).toMatch(/node:24[-.]/);
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const all = lines.join('\n');
    expect(all).toMatch(/RUN npm ci\b/);
    expect(all).toMatch(/RUN npm run build\b/);
    expect(all).toMatch(/npm ci --omit=dev/);
    // The runtime stage installs nothing and runs as the unprivileged node user.
    expect(final.some((l) => /^USER\s+(node|1000)\b/.test(l))).toBe(true);
    expect(final.some((l) => /^RUN\b/.test(l))).toBe(false);
    expect(final.some((l) => /^COPY .*dist/.test(l))).toBe(true);
    // package.json carries "type": "module", without which node would not load dist/ as ESM.
    expect(final.some((l) => /^COPY\s+package\.json\b/.test(l))).toBe(true);
    expect(final.some((l) => /^ENV\b.*\bHOST=0\.0\.0\.0\b/.test(l))).toBe(true);
  });

  it('starts node in exec form (node is PID 1 and gets SIGTERM itself)', () => {
    const cmd = final.find((l) => /^CMD\s/.test(l));
    expect(cmd).toBeDefined();
    expect(JSON.parse((cmd as string).replace(/^CMD\s+/, ''))).toEqual(['node', ENTRYPOINTS.api]);
    expect(final.some((l) => /^ENTRYPOINT\s/.test(l))).toBe(false);
  });

  it('copies only files that exist, and the build script produces what the commands run', () => {
    for (const l of lines.filter((x) => /^COPY\s/.test(x) && !/--from=/.test(x))) {
      const parts = l.split(/\s+/).slice(1).filter((p) => !p.startsWith('--'));
      for (const src of parts.slice(0, -1)) expect(existsSync(rel(src)), `${src} (${l})`).toBe(true);
    }
    const pkg = JSON.parse(read('package.json')) as Obj;
    expect(pkg.type).toBe('module');
    expect(pkg.scripts?.build, 'package.json scripts.build').toMatch(/tsc -p tsconfig\.json/);
    expect(pkg.scripts?.build).toMatch(/cp -r src\/store\/lua dist\/src\/store\//);
    const tsconfig = parse(read('tsconfig.json')) as Obj;
    expect(tsconfig.compilerOptions.outDir).toBe('dist');
    expect(tsconfig.compilerOptions.rootDir).toBe('.');
    for (const entry of Object.values(ENTRYPOINTS)) {
      const source = entry.replace(/^dist\//, '').replace(/\.js$/, '.ts');
      expect(existsSync(rel(source)), `${source} (entry point ${entry})`).toBe(true);
    }
  });
});

describe('.dockerignore', () => {
  const patterns = read('.dockerignore')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const toRegex = (p: string) =>
    new RegExp(
      `^${p
        .replace(/^\/+/, '')
        .replace(/\/+$/, '')
        .replace(/[.+^${}()|[\]\\]/g, '\\$&')
        .replace(/\*\*/g, '\u0000')
        .replace(/\*/g, '[^/]*')
        .replace(/\?/g, '[^/]')
        .replace(/\u0000/g, '.*')}(/.*)?$`,
    );
  /** Docker's rule: the last matching pattern wins, `!` re-includes. */
  const ignored = (file: string) => {
    let result = false;
    for (const p of patterns) {
      const negate = p.startsWith('!');
      if (toRegex(negate ? p.slice(1) : p).test(file)) result = !negate;
    }
    return result;
  };

  it('sends the build what it needs and nothing else', () => {
    for (const needed of ['package.json', 'package-lock.json', 'tsconfig.json', 'src/config/config.ts', 'src/store/lua/commitStep-23.lua']) {
      expect(ignored(needed), `${needed} must reach the build`).toBe(false);
    }
    for (const excluded of ['node_modules/bullmq/package.json', '.git/HEAD', 'dist/src/config/config.js', '.env', 'test/deploy/deploy.test.ts', 'k8s/api.yaml']) {
      expect(ignored(excluded), `${excluded} must stay out of the build context`).toBe(true);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// docker-compose.yml

describe('docker-compose.yml', () => {
  const compose = parse(read('docker-compose.yml'), { merge: true, maxAliasCount: 100 }) as Obj;
  const services = compose.services as Record<string, Obj>;
  const app = { api: 'api', 'worker-1': 'worker', 'worker-2': 'worker', reconciler: 'reconciler', sandbox: 'sandbox' } as const;
  type AppName = keyof typeof app;
  const env = (name: string): Record<string, string> => {
    const e = services[name]?.environment ?? {};
    if (Array.isArray(e)) return Object.fromEntries(e.map((kv: string) => [kv.split('=')[0], kv.split('=').slice(1).join('=')]));
    return Object.fromEntries(Object.entries(e).map(([k, v]) => [k, v === null ? '' : String(v)]));
  };
  /** The value a ${VAR:-default} takes when VAR is unset. */
  const dflt = (v: string | undefined) => (v ?? '').replace(/\$\{[A-Z0-9_]+:-([^}]*)\}/g, '$1');
  const port = (name: AppName): string => {
    const e = env(name);
    const kind = app[name];
    const value = { api: e.PORT, worker: e.WORKER_METRICS_PORT, reconciler: e.RECONCILER_METRICS_PORT, sandbox: e.SANDBOX_PORT }[kind];
    expect(value, `${name}: port variable`).toMatch(/^\d+$/);
    return value as string;
  };

  it('has every service of the stack', () => {
    expect(Object.keys(services).sort()).toEqual(
      ['api', 'grafana', 'prometheus', 'reconciler', 'redis', 'sandbox', 'worker-1', 'worker-2'].sort(),
    );
  });

  it('runs Redis with AOF fsynced on every write (the README\'s durability claim), noeviction, a volume and a ping health check', () => {
    const redis = services.redis as Obj;
    const args = shellWords(redis.command).join(' ');
    expect(args).toMatch(/^redis-server\b/);
    expect(args).toMatch(/--appendonly yes\b/);
    expect(args).toMatch(/--appendfsync always\b/);
    expect(read('README.md')).toMatch(/`appendfsync always`[^.]*nothing acknowledged is lost/);
    expect(args).toMatch(/--maxmemory-policy noeviction\b/);
    const volumes = (redis.volumes as string[]).map(String);
    const data = volumes.find((v) => v.split(':')[1] === '/data');
    expect(data, 'a volume on /data').toBeDefined();
    expect(Object.keys(compose.volumes ?? {})).toContain((data as string).split(':')[0]);
    expect(shellWords(redis.healthcheck?.test).join(' ')).toMatch(/redis-cli ping/);
  });

  it('starts each app service from the one image with its own entry point (the sandbox from its own target)', () => {
    for (const [name, kind] of Object.entries(app)) {
      const s = services[name] as Obj;
      const sandbox = kind === 'sandbox';
      expect(s.image, name).toBe(sandbox ? 'durable-agent-fleet-sandbox:latest' : 'durable-agent-fleet:latest');
      expect(s.build?.context, name).toBe('.');
      expect(s.build?.dockerfile ?? 'Dockerfile', name).toBe('Dockerfile');
      expect(s.build?.target, name).toBe(sandbox ? 'sandbox' : undefined);
      expect(shellWords(s.command), name).toEqual(['node', ENTRYPOINTS[kind]]);
    }
  });

  it('health-checks every app service on its own port and path', () => {
    for (const name of Object.keys(app) as AppName[]) {
      const test = shellWords(services[name]?.healthcheck?.test).join(' ');
      const p = port(name);
      const pathWanted = name === 'sandbox' ? '/healthz' : '/readyz';
      expect(test, name).toContain(`http://127.0.0.1:${p}${pathWanted}`);
      expect(services[name]?.healthcheck?.interval, name).toBeDefined();
    }
    for (const name of ['prometheus', 'grafana']) expect(services[name]?.healthcheck?.test, name).toBeDefined();
  });

  it('orders start-up with depends_on: service_healthy on services that have a health check', () => {
    const needs: Record<string, string[]> = {
      api: ['redis'],
      'worker-1': ['redis'],
      'worker-2': ['redis'],
      reconciler: ['redis'],
      prometheus: [],
      grafana: ['prometheus'],
    };
    for (const [name, deps] of Object.entries(needs)) {
      const dependsOn = (services[name]?.depends_on ?? {}) as Record<string, Obj>;
      expect(Array.isArray(dependsOn), `${name}: depends_on must use the long form`).toBe(false);
      for (const d of deps) expect(dependsOn[d]?.condition, `${name} -> ${d}`).toBe('service_healthy');
      for (const [d, spec] of Object.entries(dependsOn)) {
        expect(spec.condition, `${name} -> ${d}`).toBe('service_healthy');
        expect(services[d]?.healthcheck?.test, `${d} is waited on, so it needs a health check`).toBeDefined();
        expect(services[d]?.profiles, `${name} -> ${d}: a service of the default stack waits only on default services`).toBeUndefined();
      }
    }
  });

  it('gives each process the environment it needs, in containers', () => {
    for (const name of ['api', 'worker-1', 'worker-2', 'reconciler']) {
      const e = env(name);
      expect(e.REDIS_URL, name).toBe('redis://redis:6379');
      expect(e.HOST, name).toBe('0.0.0.0');
      expect(dflt(e.SHUTDOWN_GRACE_MS), name).toMatch(/^\d+$/);
    }
    const api = env('api');
    expect(api.PORT).toBe('3000');
    for (const name of ['worker-1', 'worker-2']) {
      const e = env(name);
      expect(e.WORKER_METRICS_PORT, name).toBe('9464');
      expect(e.LOCK_DURATION_MS, name).toBe('20000');
      expect(e.STALLED_INTERVAL_MS, name).toBe('5000');
      expect(e.OWNER_WATCH_MS, name).toBe('100');
    }
    expect(env('reconciler').RECONCILER_METRICS_PORT).toBe('9465');
    expect(env('sandbox').SANDBOX_HOST).toBe('0.0.0.0');
    expect(env('sandbox').SANDBOX_PORT).toBe('4010');
  });

  it('ships production by default: no sandbox, no scripted model, no default secret; the app refuses to boot until they are given', () => {
    expect(services.sandbox?.profiles, 'the sandbox is in the dev profile only').toEqual(['dev']);
    const secrets = ['PRODUCER_TOKEN', 'OPERATOR_TOKEN', 'METRICS_TOKEN', 'OPENAI_API_KEY', 'BULL_BOARD_USER', 'BULL_BOARD_PASSWORD', 'SANDBOX_URL', 'ZENDESK_TOKEN', 'ZENDESK_OAUTH_TOKEN', 'RESEND_API_KEY', 'STRIPE_API_KEY'];
    for (const name of ['api', 'worker-1', 'worker-2', 'reconciler']) {
      const e = env(name);
      expect(dflt(e.APP_MODE), name).toBe('production');
      expect(dflt(e.MODEL_PROVIDER), name).toBe('openai');
      expect(e.SCRIPTED_MODEL_ENABLED, name).toBeUndefined();
      for (const k of secrets) if (k in e) expect(dflt(e[k]), `${name} ${k}: no default`).toBe('');
      const resolved = Object.fromEntries(Object.entries(e).map(([k, v]) => [k, dflt(v)]));
      expect(() => loadConfig(resolved), name).toThrow(ConfigError);
      const given = { ...resolved, PRODUCER_TOKEN: 'producer-token-from-env', OPERATOR_TOKEN: 'operator-token-from-env', OPENAI_API_KEY: 'k', SANDBOX_URL: 'https://support.example.com', ZENDESK_EMAIL: 'agent@example.com', ZENDESK_TOKEN: 'z', RESEND_API_KEY: 're_x', RESEND_FROM: 'Support <support@example.com>', STRIPE_API_KEY: 'sk_test_x' };
      expect(loadConfig(given).APP_MODE, name).toBe('production');
    }
    expect(String(services.grafana?.environment?.GF_SECURITY_ADMIN_PASSWORD)).toMatch(/^\$\{GRAFANA_ADMIN_PASSWORD:\?/);
  });

  it('runs the development stack from the dev profile and deploy/dev.env: sandbox, scripted model, demo tokens', () => {
    const devEnv = Object.fromEntries(
      read('deploy/dev.env').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#')).map((l) => [l.split('=')[0], l.split('=').slice(1).join('=')]),
    ) as Record<string, string>;
    /** ${VAR:-default} as Compose resolves it with deploy/dev.env. */
    const withDev = (v: string | undefined) => (v ?? '').replace(/\$\{([A-Z0-9_]+):-([^}]*)\}/g, (_, k: string, d: string) => devEnv[k] ?? d);
    expect(devEnv.SANDBOX_URL).toBe(`http://sandbox:${port('sandbox')}`);
    for (const name of ['api', 'worker-1', 'worker-2', 'reconciler']) {
      const resolved = Object.fromEntries(Object.entries(env(name)).map(([k, v]) => [k, withDev(v)]));
      const cfg = loadConfig(resolved);
      expect(cfg.APP_MODE, name).toBe('development');
      expect(cfg.MODEL_PROVIDER, name).toBe('scripted');
      expect(agentSettings(cfg, resolved).SANDBOX_URL, name).toBe(devEnv.SANDBOX_URL);
    }
    expect(Object.keys(devEnv).filter((k) => !KNOWN_ENV.has(k) && k !== 'GRAFANA_ADMIN_PASSWORD')).toEqual([]);
  });

  it('sets no variable the app does not read (typo guard)', () => {
    for (const name of Object.keys(app)) {
      const unknown = Object.keys(env(name)).filter((k) => !KNOWN_ENV.has(k));
      expect(unknown, name).toEqual([]);
    }
  });

  it('lets workers finish their SIGTERM handoff before Docker kills them', () => {
    for (const name of ['worker-1', 'worker-2']) {
      const s = services[name] as Obj;
      const grace = Number(dflt(env(name).SHUTDOWN_GRACE_MS));
      expect(s.stop_signal ?? 'SIGTERM', name).toBe('SIGTERM');
      expect(durationMs(String(s.stop_grace_period)), `${name}: stop_grace_period vs SHUTDOWN_GRACE_MS + exit margin`).toBeGreaterThan(
        grace + WORKER_HARD_EXIT_MARGIN_MS,
      );
    }
  });

  it('wires Prometheus to the rules and the scrape targets to the services', () => {
    const prom = services.prometheus as Obj;
    expect((prom.volumes as string[]).map(String)).toContain('./deploy/prometheus:/etc/prometheus:ro');
    expect(shellWords(prom.command)).toContain('--config.file=/etc/prometheus/prometheus.yml');
    const cfg = parse(read('deploy/prometheus/prometheus.yml')) as Obj;
    expect(cfg.rule_files).toEqual(['rules.yml']);
    const targets = Object.fromEntries(
      (cfg.scrape_configs as Obj[]).map((sc) => [sc.job_name, (sc.static_configs as Obj[]).flatMap((s) => s.targets as string[])]),
    );
    // The API's metrics are on their own port, on the compose network only (API_METRICS_PORT, not published).
    const apiMetricsPort = env('api').API_METRICS_PORT;
    expect(apiMetricsPort).toMatch(/^\d+$/);
    expect(apiMetricsPort).not.toBe(port('api'));
    expect(JSON.stringify((services.api as Obj).ports ?? [])).not.toContain(`:${apiMetricsPort}`);
    expect(targets.api).toEqual([`api:${apiMetricsPort}`]);
    expect(targets.worker).toEqual([`worker-1:${port('worker-1')}`, `worker-2:${port('worker-2')}`]);
    expect(targets.reconciler).toEqual([`reconciler:${port('reconciler')}`]);
    // Production serves no /metrics without METRICS_TOKEN: every app job sends it, from the file the prometheus
    // service writes from the same variable the apps read.
    const tokenFile = '/prometheus/metrics-token';
    for (const sc of (cfg.scrape_configs as Obj[]).filter((s) => ['api', 'worker', 'reconciler'].includes(s.job_name))) {
      expect(sc.authorization, sc.job_name).toEqual({ type: 'Bearer', credentials_file: tokenFile });
    }
    expect(env('prometheus').METRICS_TOKEN).toBe(env('api').METRICS_TOKEN);
    const entrypoint = (prom.entrypoint as string[]).join(' ');
    expect(entrypoint).toContain(`"$$METRICS_TOKEN" > ${tokenFile}`);
    expect(entrypoint).toContain('exec /bin/prometheus "$$@"');
  });

  it('provisions Grafana with the Prometheus datasource and the dashboard folder', () => {
    const volumes = (services.grafana?.volumes as string[]).map(String);
    expect(volumes).toContain('./deploy/grafana/provisioning:/etc/grafana/provisioning:ro');
    const dashMount = volumes.find((v) => v.startsWith('./deploy/grafana/dashboards:'));
    expect(dashMount).toBeDefined();
    const providers = parse(read('deploy/grafana/provisioning/dashboards/agent-fleet.yml')) as Obj;
    expect(providers.providers[0].options.path).toBe((dashMount as string).split(':')[1]);
    const ds = parse(read('deploy/grafana/provisioning/datasources/prometheus.yml')) as Obj;
    expect(ds.datasources[0]).toMatchObject({ type: 'prometheus', uid: 'prometheus', url: 'http://prometheus:9090' });
  });

  it('is valid for docker-compose (`docker-compose config`), and refuses to render without the Grafana password', () => {
    const bin = requireTool('docker-compose', 'Compose file validator, Debian package docker-compose');
    expectSuccess(bin, ['--env-file', 'deploy/dev.env', '-f', 'docker-compose.yml', '--profile', 'dev', 'config', '-q']);
    const bare = run(bin, ['-f', 'docker-compose.yml', 'config', '-q']);
    expect(bare.status).not.toBe(0);
    expect(bare.out).toMatch(/GRAFANA_ADMIN_PASSWORD/);
  }, TOOL_TIMEOUT_MS);
});

// ---------------------------------------------------------------------------------------------
// Prometheus rules

describe('Prometheus rules', () => {
  const rules = parse(read('deploy/prometheus/rules.yml')) as Obj;
  const alerting = (rules.groups as Obj[]).flatMap((g) => g.rules as Obj[]).filter((r) => r.alert);
  const byName = new Map(alerting.map((r) => [r.alert as string, r]));

  it('promtool accepts prometheus.yml and rules.yml', () => {
    const promtool = requireTool('promtool', 'Debian package prometheus');
    // --syntax-only: the full check stats the scrape jobs' credentials_file, which the compose prometheus service
    // writes when it starts (rules.yml is checked on its own below).
    expectSuccess(promtool, ['check', 'config', '--syntax-only', 'deploy/prometheus/prometheus.yml']);
    expectSuccess(promtool, ['check', 'rules', 'deploy/prometheus/rules.yml']);
  }, TOOL_TIMEOUT_MS);

  it('passes its unit tests (`promtool test rules`)', () => {
    const promtool = requireTool('promtool', 'Debian package prometheus');
    const out = expectSuccess(promtool, ['test', 'rules', 'deploy/prometheus/rules.test.yml']);
    expect(out).toMatch(/SUCCESS/);
  }, TOOL_TIMEOUT_MS);

  it('has every required alert, written against the exported metrics, with severity and text', () => {
    expect([...byName.keys()].sort()).toEqual(Object.keys(ALERTS).sort());
    for (const [name, metrics] of Object.entries(ALERTS)) {
      const r = byName.get(name) as Obj;
      for (const m of metrics) expect(r.expr, name).toContain(m);
      expect(['critical', 'warning'], name).toContain(r.labels?.severity);
      expect(r.annotations?.summary, name).toBeTruthy();
      expect(r.annotations?.description, name).toBeTruthy();
    }
    const used = alerting.flatMap((r) => metricNames(String(r.expr))).map(baseMetric);
    expect(used.filter((m) => !METRICS.has(m))).toEqual([]);
  });

  it('unit-tests every alert with series that fire and series that stay quiet', () => {
    const tests = parse(read('deploy/prometheus/rules.test.yml')) as Obj;
    expect(tests.rule_files).toEqual(['rules.yml']);
    const cases = (tests.tests as Obj[]).flatMap((t) => (t.alert_rule_test ?? []) as Obj[]);
    for (const name of Object.keys(ALERTS)) {
      const mine = cases.filter((c) => c.alertname === name);
      expect(mine.some((c) => (c.exp_alerts ?? []).length > 0), `${name}: a case where it fires`).toBe(true);
      expect(mine.some((c) => (c.exp_alerts ?? []).length === 0), `${name}: a case where it stays quiet`).toBe(true);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Grafana dashboard

describe('Grafana dashboard', () => {
  const dash = JSON.parse(read('deploy/grafana/dashboards/agent-fleet.json')) as Obj;
  const panels = dash.panels as Obj[];
  const targets: Obj[] = panels.flatMap((p) => ((p.targets ?? []) as Obj[]).map((t) => ({ ...t, panel: String(p.title) })));

  it('has the panels an operator needs', () => {
    expect(dash.uid).toBe('agent-fleet');
    const titles = panels.map((p) => String(p.title));
    for (const want of [/steps\/s/i, /effects by state/i, /duplicate writes/i, /unknown/i, /budget stops/i, /queue depth/i]) {
      expect(titles.some((t) => want.test(t)), `a panel matching ${want}`).toBe(true);
    }
    expect(new Set(panels.map((p) => p.id)).size).toBe(panels.length);
  });

  it('lays panels out without overlap', () => {
    const cells = new Map<string, string>();
    for (const p of panels) {
      const g = p.gridPos as { x: number; y: number; w: number; h: number };
      expect(g.x + g.w, String(p.title)).toBeLessThanOrEqual(24);
      for (let x = g.x; x < g.x + g.w; x++)
        for (let y = g.y; y < g.y + g.h; y++) {
          const key = `${x},${y}`;
          expect(cells.get(key), `${p.title} overlaps ${cells.get(key)}`).toBeUndefined();
          cells.set(key, String(p.title));
        }
    }
  });

  it('queries the provisioned datasource, and only metrics the app exports', () => {
    expect(targets.length).toBeGreaterThan(0);
    for (const t of targets) {
      expect(t.datasource?.uid, t.panel).toBe('prometheus');
      for (const m of metricNames(String(t.expr))) expect(METRICS.has(baseMetric(m)), `${t.panel}: ${m}`).toBe(true);
    }
  });

  it('uses valid PromQL (checked by promtool as recording rules)', () => {
    const promtool = requireTool('promtool', 'Debian package prometheus');
    const dir = mkdtempSync(path.join(tmpdir(), 'dashboard-promql-'));
    try {
      const recorded = targets.map((t, i) => ({
        record: `dashboard:panel_${i}`,
        expr: String(t.expr).replaceAll('$__rate_interval', '1m').replaceAll('$__interval', '1m').replaceAll('$__range', '1h'),
      }));
      writeFileSync(path.join(dir, 'dashboard.rules.yml'), stringify({ groups: [{ name: 'dashboard', rules: recorded }] }));
      expectSuccess(promtool, ['check', 'rules', path.join(dir, 'dashboard.rules.yml')]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, TOOL_TIMEOUT_MS);
});

// ---------------------------------------------------------------------------------------------
// Kubernetes

type ModelCtor = new (data: Obj) => { validate(): void };

async function loadModels(): Promise<Record<string, ModelCtor>> {
  const core = await importPackage('kubernetes-models', () => import('kubernetes-models/v1'));
  const apps = await importPackage('kubernetes-models', () => import('kubernetes-models/apps/v1'));
  const policy = await importPackage('kubernetes-models', () => import('kubernetes-models/policy/v1'));
  const autoscaling = await importPackage('kubernetes-models', () => import('kubernetes-models/autoscaling/v2'));
  const monitoring = await importPackage('@kubernetes-models/prometheus-operator', () =>
    import('@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1'),
  );
  const m = (c: unknown) => c as ModelCtor;
  return {
    'v1/ConfigMap': m(core.ConfigMap),
    'v1/Secret': m(core.Secret),
    'v1/Service': m(core.Service),
    'apps/v1/Deployment': m(apps.Deployment),
    'apps/v1/StatefulSet': m(apps.StatefulSet),
    'policy/v1/PodDisruptionBudget': m(policy.PodDisruptionBudget),
    'autoscaling/v2/HorizontalPodAutoscaler': m(autoscaling.HorizontalPodAutoscaler),
    'monitoring.coreos.com/v1/ServiceMonitor': m(monitoring.ServiceMonitor),
    'monitoring.coreos.com/v1/PrometheusRule': m(monitoring.PrometheusRule),
  };
}

/**
 * The models' validators (compiled from the OpenAPI schemas) ignore fields they do not know, as
 * the API server does without strict field validation. To reject them too, the object is
 * validated through a proxy that records which properties the validator looked at: a property it
 * never read is not in the schema. Objects the validator enumerates (maps such as labels) and
 * objects it never reached (free-form values) are not judged.
 */
function validateStrict(models: Record<string, ModelCtor>, doc: Obj): string[] {
  const Model = models[`${doc.apiVersion}/${doc.kind}`];
  if (!Model) return [`no schema for ${doc.apiVersion} ${doc.kind}: add it to loadModels() in test/deploy/deploy.test.ts`];
  const model = new Model(doc);
  const seen = new WeakMap<object, { read: Set<string>; enumerated: boolean }>();
  const proxies = new WeakMap<object, object>();
  const wrap = (v: unknown): unknown => {
    if (v === null || typeof v !== 'object') return v;
    const cached = proxies.get(v);
    if (cached) return cached;
    const info = { read: new Set<string>(), enumerated: false };
    seen.set(v, info);
    const p = new Proxy(v, {
      get(target, key, receiver) {
        if (typeof key === 'string') info.read.add(key);
        return wrap(Reflect.get(target, key, receiver));
      },
      has(target, key) {
        if (typeof key === 'string') info.read.add(key);
        return Reflect.has(target, key);
      },
      ownKeys(target) {
        info.enumerated = true;
        return Reflect.ownKeys(target);
      },
    });
    proxies.set(v, p);
    return p;
  };
  try {
    model.validate.call(wrap(model));
  } catch (err) {
    return [(err as Error).message];
  }
  const unknown: string[] = [];
  const walk = (v: unknown, at: string) => {
    if (Array.isArray(v)) return void v.forEach((x, i) => walk(x, `${at}[${i}]`));
    if (v === null || typeof v !== 'object') return;
    const info = seen.get(v);
    if (!info) return;
    for (const [k, child] of Object.entries(v)) {
      if (!info.enumerated && !info.read.has(k)) unknown.push(`${at}.${k}: unknown field`);
      walk(child, `${at}.${k}`);
    }
  };
  walk(model, '');
  return unknown;
}

describe('Kubernetes manifests', () => {
  const kustomization = parse(read(K8S_BASE, 'kustomization.yaml')) as Obj;
  const resources = (kustomization.resources ?? []) as string[];
  const sources = resources.map((file) => ({ file, docs: yamlDocs(path.join(K8S_BASE, file)) }));
  const docs = sources.flatMap((s) => s.docs.map((doc) => ({ file: s.file, doc })));
  const find = (kind: string, name: string) => docs.find((d) => d.doc.kind === kind && d.doc.metadata?.name === name)?.doc;
  const secretTemplate = yamlDocs(`${K8S_BASE}/secret.template.yaml`);
  const config = find('ConfigMap', 'agent-fleet-config') as Obj;
  const workloads = docs.filter((d) => ['Deployment', 'StatefulSet'].includes(d.doc.kind)).map((d) => d.doc);
  const apps = { 'agent-api': 'api', 'agent-worker': 'worker', 'agent-reconciler': 'reconciler' } as const;
  const container = (name: keyof typeof apps) => find('Deployment', name)?.spec.template.spec.containers[0] as Obj;
  const devDocs = (parse(read(K8S_DEV, 'kustomization.yaml')) as Obj).resources
    .filter((f: string) => !f.startsWith('..'))
    .flatMap((f: string) => yamlDocs(path.join(K8S_DEV, f)).map((doc) => ({ file: `overlays/dev/${f}`, doc }))) as { file: string; doc: Obj }[];
  const preStopSleepMs = (c: Obj) => {
    const cmd = (c.lifecycle?.preStop?.exec?.command ?? []) as string[];
    return cmd[0] === 'sleep' ? Number(cmd[1]) * 1000 : 0;
  };

  it('lists every manifest in kustomization.yaml (the Secret template excepted)', () => {
    const onDisk = readdirSync(rel(K8S_BASE)).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml');
    const listed = new Set(resources);
    expect(listed.size).toBe(resources.length);
    for (const f of resources) expect(existsSync(rel(K8S_BASE, f)), f).toBe(true);
    expect(onDisk.filter((f) => !listed.has(f) && !f.endsWith('.template.yaml'))).toEqual([]);
    expect(resources.filter((f) => f.endsWith('.template.yaml'))).toEqual([]);
    for (const s of sources) expect(s.docs.length, s.file).toBeGreaterThan(0);
  });

  it('is namespace-agnostic', () => {
    expect(kustomization.namespace).toBeUndefined();
    for (const { file, doc } of [...docs, ...secretTemplate.map((doc) => ({ file: 'secret.template.yaml', doc }))]) {
      expect(doc.metadata?.namespace, `${file} ${doc.kind}/${doc.metadata?.name}`).toBeUndefined();
    }
  });

  it('rejects a broken manifest (negative control of the validator)', async () => {
    const models = await loadModels();
    const ok: Obj = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'x', labels: { a: 'b' } },
      spec: { selector: { matchLabels: { a: 'b' } }, template: { metadata: { labels: { a: 'b' } }, spec: { containers: [{ name: 'c', image: 'i' }] } } },
    };
    expect(validateStrict(models, ok)).toEqual([]);
    const typo = structuredClone(ok);
    typo.spec.template.spec.terminationGracePeriod = 30;
    expect(validateStrict(models, typo)).toEqual(['.spec.template.spec.terminationGracePeriod: unknown field']);
    const badType = structuredClone(ok);
    badType.spec.template.spec.containers[0].ports = [{ containerPort: 'http' }];
    expect(validateStrict(models, badType).join()).toMatch(/containerPort must be integer/);
    const noContainers = structuredClone(ok);
    delete noContainers.spec.template.spec.containers;
    expect(validateStrict(models, noContainers).join()).toMatch(/containers/);
    expect(validateStrict(models, { apiVersion: 'example.com/v1', kind: 'Nope' }).join()).toMatch(/no schema/);
  });

  it('validates every manifest against the Kubernetes OpenAPI schemas, unknown fields rejected', async () => {
    const models = await loadModels();
    const problems: string[] = [];
    for (const { file, doc } of [...docs, ...devDocs, ...secretTemplate.map((doc) => ({ file: 'secret.template.yaml', doc }))]) {
      for (const p of validateStrict(models, doc)) problems.push(`${file} ${doc.kind}/${doc.metadata?.name}: ${p}`);
      const name = String(doc.metadata?.name ?? '');
      if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name) || name.length > 63) problems.push(`${file}: bad name "${name}"`);
    }
    expect(problems).toEqual([]);
  });

  it('renders with `kubectl kustomize` to the same objects, with the image tag set', async () => {
    const kubectl = requireTool('kubectl', 'for `kubectl kustomize`; Debian package kubernetes-client');
    const out = expectSuccess(kubectl, ['kustomize', K8S_BASE]);
    const rendered = parseAllDocuments(out).map((d) => d.toJS() as Obj).filter(Boolean);
    const id = (d: Obj) => `${d.apiVersion} ${d.kind} ${d.metadata?.name}`;
    expect(rendered.map(id).sort()).toEqual(docs.map((d) => id(d.doc)).sort());
    const images = rendered
      .filter((d) => ['Deployment', 'StatefulSet'].includes(d.kind))
      .flatMap((d) => (d.spec.template.spec.containers as Obj[]).map((c) => String(c.image)));
    expect(images.filter((i) => i.startsWith('durable-agent-fleet')).every((i) => /^durable-agent-fleet:\S+$/.test(i))).toBe(true);
    expect(images.filter((i) => i.startsWith('durable-agent-fleet')).length).toBe(Object.keys(apps).length);
    const models = await loadModels();
    const problems = rendered.flatMap((d) => validateStrict(models, d).map((p) => `${id(d)}: ${p}`));
    expect(problems).toEqual([]);
  }, TOOL_TIMEOUT_MS);

  it('gives the worker a grace period longer than its preStop plus SHUTDOWN_GRACE_MS', () => {
    const worker = find('Deployment', 'agent-worker') as Obj;
    const grace = Number(config.data.SHUTDOWN_GRACE_MS);
    expect(grace).toBeGreaterThan(0);
    const c = container('agent-worker');
    const sleepMs = preStopSleepMs(c);
    expect(sleepMs, 'worker preStop sleep').toBeGreaterThan(0);
    const tgps = Number(worker.spec.template.spec.terminationGracePeriodSeconds);
    expect(tgps * 1000).toBeGreaterThan(grace);
    expect(tgps * 1000, 'terminationGracePeriodSeconds vs preStop + SHUTDOWN_GRACE_MS + exit margin').toBeGreaterThan(
      sleepMs + grace + WORKER_HARD_EXIT_MARGIN_MS,
    );
    // and compose agrees on the grace
    const compose = parse(read('docker-compose.yml'), { merge: true }) as Obj;
    expect(String(compose.services['worker-1'].environment.SHUTDOWN_GRACE_MS)).toBe(config.data.SHUTDOWN_GRACE_MS);
  });

  it('runs each process with probes, resources, its entry point and its port', () => {
    const ports = { api: config.data.PORT, worker: config.data.WORKER_METRICS_PORT, reconciler: config.data.RECONCILER_METRICS_PORT };
    for (const [name, kind] of Object.entries(apps) as [keyof typeof apps, (typeof apps)[keyof typeof apps]][]) {
      const c = container(name);
      expect(c, name).toBeDefined();
      expect(c.command, name).toEqual(['node', ENTRYPOINTS[kind]]);
      expect(c.image, name).toBe('durable-agent-fleet');
      expect(String(c.ports[0].containerPort), name).toBe(ports[kind]);
      const portName = c.ports[0].name as string;
      expect(c.readinessProbe.httpGet, name).toMatchObject({ path: '/readyz', port: portName });
      expect(c.livenessProbe.httpGet, name).toMatchObject({ path: '/healthz', port: portName });
    }
    for (const w of workloads) {
      for (const c of w.spec.template.spec.containers as Obj[]) {
        const at = `${w.kind}/${w.metadata.name}/${c.name}`;
        expect(c.readinessProbe, at).toBeDefined();
        expect(c.livenessProbe, at).toBeDefined();
        for (const k of ['requests', 'limits']) for (const r of ['cpu', 'memory']) expect(c.resources?.[k]?.[r], `${at} ${k}.${r}`).toBeDefined();
        expect(c.securityContext?.allowPrivilegeEscalation, at).toBe(false);
      }
      expect(w.spec.template.spec.securityContext?.runAsNonRoot, `${w.metadata.name}`).toBe(true);
    }
  });

  it('configures the apps through the ConfigMap and the Secret, with only known variables', () => {
    expect(config.data.HOST).toBe('0.0.0.0');
    expect(config.data.REDIS_URL, 'REDIS_URL carries the password: Secret only').toBeUndefined();
    expect(Object.keys(config.data).filter((k) => !KNOWN_ENV.has(k))).toEqual([]);
    const secret = secretTemplate[0] as Obj;
    expect(secret.kind).toBe('Secret');
    for (const k of Object.keys(secret.stringData).filter((k) => k !== 'REDIS_PASSWORD')) expect(KNOWN_ENV.has(k), k).toBe(true);
    for (const name of ['agent-api', 'agent-worker', 'agent-reconciler'] as const) {
      const refs = (container(name).envFrom as Obj[]).map((e) => e.configMapRef?.name ?? e.secretRef?.name);
      expect(refs, name).toEqual(['agent-fleet-config', secret.metadata.name]);
    }
    // every secretKeyRef names a key of the template
    const keyRefs = workloads.flatMap((w) =>
      (w.spec.template.spec.containers as Obj[]).flatMap((c) => ((c.env ?? []) as Obj[]).map((e) => e.valueFrom?.secretKeyRef).filter(Boolean)),
    ) as Obj[];
    expect(keyRefs.length).toBeGreaterThan(0);
    for (const ref of keyRefs) {
      expect(ref.name).toBe(secret.metadata.name);
      expect(Object.keys(secret.stringData)).toContain(ref.key);
    }
  });

  it('ships a Secret template with placeholders only', () => {
    const secret = secretTemplate[0] as Obj;
    expect(secretTemplate.length).toBe(1);
    expect(secret.data).toBeUndefined();
    for (const k of ['REDIS_PASSWORD', 'REDIS_URL', 'PRODUCER_TOKEN', 'OPERATOR_TOKEN', 'BULL_BOARD_USER', 'BULL_BOARD_PASSWORD', 'OPENAI_API_KEY']) {
      expect(String(secret.stringData[k]), k).toContain('REPLACE_ME');
    }
    for (const [k, v] of Object.entries(secret.stringData)) expect(String(v), k).toContain('REPLACE_ME');
  });

  it('routes Services, ServiceMonitors, the PDB and the HPA to the right pods and ports', () => {
    const podsOf = (selector: Obj) => workloads.filter((w) => labelsMatch(selector, w.spec.template.metadata.labels));
    for (const svc of docs.filter((d) => d.doc.kind === 'Service').map((d) => d.doc)) {
      const pods = podsOf(svc.spec.selector);
      expect(pods.length, `Service ${svc.metadata.name} selects a workload`).toBe(1);
      const portNames = (pods[0]?.spec.template.spec.containers as Obj[]).flatMap((c) => ((c.ports ?? []) as Obj[]).map((p) => p.name));
      for (const p of svc.spec.ports as Obj[]) expect(portNames, `Service ${svc.metadata.name} port ${p.name}`).toContain(p.targetPort);
    }
    for (const sm of docs.filter((d) => d.doc.kind === 'ServiceMonitor').map((d) => d.doc)) {
      const svcs = docs.filter((d) => d.doc.kind === 'Service' && labelsMatch(sm.spec.selector.matchLabels, d.doc.metadata.labels));
      expect(svcs.length, `ServiceMonitor ${sm.metadata.name} selects a Service`).toBe(1);
      for (const ep of sm.spec.endpoints as Obj[]) {
        expect((svcs[0]?.doc.spec.ports as Obj[]).map((p) => p.name), sm.metadata.name).toContain(ep.port);
        expect(ep.path).toBe('/metrics');
      }
    }
    const monitored = docs.filter((d) => d.doc.kind === 'ServiceMonitor').map((d) => d.doc.spec.selector.matchLabels['app.kubernetes.io/name']);
    expect(monitored.sort()).toEqual(['agent-api', 'agent-reconciler', 'agent-worker']);

    const worker = find('Deployment', 'agent-worker') as Obj;
    const pdb = find('PodDisruptionBudget', 'agent-worker') as Obj;
    expect(labelsMatch(pdb.spec.selector.matchLabels, worker.spec.template.metadata.labels)).toBe(true);
    const hpa = find('HorizontalPodAutoscaler', 'agent-worker') as Obj;
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'agent-worker' });
    expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
    expect(hpa.spec.maxReplicas).toBeGreaterThan(hpa.spec.minReplicas);
    expect(hpa.spec.metrics).toEqual([
      expect.objectContaining({
        type: 'External',
        external: expect.objectContaining({ metric: { name: 'agent_queue_jobs', selector: { matchLabels: { state: 'waiting' } } } }),
      }),
    ]);
    expect(worker.spec.replicas, 'the HPA owns the worker replica count').toBeUndefined();
  });

  it('runs Redis as a StatefulSet on a PVC with AOF and noeviction', () => {
    const sts = find('StatefulSet', 'redis') as Obj;
    const conf = String((find('ConfigMap', 'redis-config') as Obj).data['redis.conf']);
    const setting = (k: string) => conf.match(new RegExp(`^\\s*${k}\\s+(\\S+)`, 'm'))?.[1];
    expect(setting('appendonly')).toBe('yes');
    expect(setting('appendfsync'), 'the README\'s durability claim: nothing acknowledged is lost').toBe('always');
    expect(setting('maxmemory-policy')).toBe('noeviction');
    expect(setting('dir')).toBe('/data');
    const c = sts.spec.template.spec.containers[0] as Obj;
    expect(c.command.slice(0, 2)).toEqual(['redis-server', '/etc/redis/redis.conf']);
    const claim = (sts.spec.volumeClaimTemplates as Obj[])[0] as Obj;
    expect((c.volumeMounts as Obj[]).find((m) => m.name === claim.metadata.name)?.mountPath).toBe('/data');
    expect(claim.spec.resources.requests.storage).toBeDefined();
    const svc = find('Service', sts.spec.serviceName) as Obj;
    expect(svc.spec.clusterIP).toBe('None');
    const secret = secretTemplate[0] as Obj;
    expect(String(secret.stringData.REDIS_URL)).toMatch(new RegExp(`^redis://[^@]*@${svc.metadata.name}:6379$`));
  });

  it('ships production in the base: no sandbox, no scripted model, and the support agent boots only once the overlay gives SANDBOX_URL and the Secret', () => {
    expect(workloads.map((w) => w.metadata.name)).not.toContain('agent-sandbox');
    expect(JSON.stringify(docs.map((d) => d.doc))).not.toMatch(/agent-sandbox|SCRIPTED_MODEL_ENABLED/);
    expect(config.data.APP_MODE).toBe('production');
    expect(config.data.MODEL_PROVIDER).toBe('openai');
    expect(() => loadConfig(config.data)).toThrow(ConfigError);
    const template = { ...(secretTemplate[0] as Obj).stringData, REDIS_URL: 'redis://:pw@redis:6379' } as Record<string, string>;
    // The template as shipped is refused: a placeholder is no credential (production wants 16 characters or more).
    expect(() => loadConfig({ ...config.data, ...template })).toThrow(/PRODUCER_TOKEN: must be at least 16 characters/);
    const secret = Object.fromEntries(Object.entries(template).map(([k, v]) => [k, v === 'REPLACE_ME' ? `${k.toLowerCase()}-replaced-by-the-operator` : v]));
    const cfg = loadConfig({ ...config.data, ...secret });
    expect(cfg.APP_MODE).toBe('production');
    expect(() => agentSettings(cfg, { ...config.data, ...secret })).toThrow(/SANDBOX_URL/);
    expect(agentSettings(cfg, { ...config.data, ...secret, SANDBOX_URL: 'https://support.example.com' }).SANDBOX_URL).toBe('https://support.example.com');
  });

  it('renders the dev overlay: the base plus the sandbox, development mode with the scripted model pointed at it', async () => {
    const kubectl = requireTool('kubectl', 'for `kubectl kustomize`; Debian package kubernetes-client');
    const rendered = parseAllDocuments(expectSuccess(kubectl, ['kustomize', K8S_DEV])).map((d) => d.toJS() as Obj).filter(Boolean);
    const id = (d: Obj) => `${d.apiVersion} ${d.kind} ${d.metadata?.name}`;
    const secret = secretTemplate[0] as Obj;
    expect(rendered.map(id).sort()).toEqual([...docs.map((d) => d.doc), ...devDocs.map((d) => d.doc), secret].map(id).sort());
    const models = await loadModels();
    expect(rendered.flatMap((d) => validateStrict(models, d).map((p) => `${id(d)}: ${p}`))).toEqual([]);
    const get = (kind: string, name: string) => rendered.find((d) => d.kind === kind && d.metadata.name === name) as Obj;
    const sandbox = get('Deployment', 'agent-sandbox').spec.template.spec.containers[0] as Obj;
    expect(sandbox.command).toEqual(['node', ENTRYPOINTS.sandbox]);
    expect(sandbox.image, 'the overlay tags the sandbox image like the base tags the apps').toBe(`durable-agent-fleet-sandbox:${(kustomization.images as Obj[])[0]?.newTag}`);
    expect(sandbox.readinessProbe.httpGet).toMatchObject({ path: '/healthz', port: sandbox.ports[0].name });
    expect(sandbox.livenessProbe.httpGet).toMatchObject({ path: '/healthz', port: sandbox.ports[0].name });
    expect(sandbox.env).toEqual(expect.arrayContaining([{ name: 'SANDBOX_HOST', value: '0.0.0.0' }, { name: 'SANDBOX_PORT', value: String(sandbox.ports[0].containerPort) }]));
    const svc = get('Service', 'agent-sandbox');
    const devSecret = get('Secret', secret.metadata.name);
    expect(Object.keys(devSecret.data ?? devSecret.stringData).sort()).toEqual(Object.keys(secret.stringData).filter((k) => k !== 'OPENAI_API_KEY').sort());
    const data = get('ConfigMap', 'agent-fleet-config').data as Record<string, string>;
    const cfg = loadConfig({ ...data, REDIS_URL: 'redis://:pw@redis:6379' });
    expect(cfg.APP_MODE).toBe('development');
    expect(cfg.MODEL_PROVIDER).toBe('scripted');
    expect(agentSettings(cfg, data).SANDBOX_URL).toBe(`http://${svc.metadata.name}:${svc.spec.ports[0].port}`);
  }, TOOL_TIMEOUT_MS);

  it('renders the replicated overlay: three Redis data pods, three Sentinels with a quorum of two, apps that follow them and wait for a replica', async () => {
    const kubectl = requireTool('kubectl', 'for `kubectl kustomize`; Debian package kubernetes-client');
    const rendered = parseAllDocuments(expectSuccess(kubectl, ['kustomize', 'k8s/overlays/replicated']))
      .map((d) => d.toJS() as Obj)
      .filter(Boolean);
    const models = await loadModels();
    const id = (d: Obj) => `${d.kind} ${d.metadata?.name}`;
    expect(rendered.flatMap((d) => validateStrict(models, d).map((p) => `${id(d)}: ${p}`))).toEqual([]);
    const get = (kind: string, name: string) => rendered.find((d) => d.kind === kind && d.metadata.name === name) as Obj;
    const redis = get('StatefulSet', 'redis');
    const sentinel = get('StatefulSet', 'redis-sentinel');
    expect(redis.spec.replicas).toBe(3);
    expect(sentinel.spec.replicas).toBe(3);
    expect(get('Service', sentinel.spec.serviceName).spec.clusterIP).toBe('None');
    // Every data pod runs the base's redis.conf (AOF always, noeviction): a promoted replica is the next master.
    const redisConf = String(get('ConfigMap', 'redis-config').data['redis.conf']);
    expect(redisConf).toMatch(/^appendfsync always$/m);
    expect(redisConf).toMatch(/^maxmemory-policy noeviction$/m);
    const redisScript = (redis.spec.template.spec.containers[0].command as string[]).join(' ');
    expect(redisScript).toContain('/etc/redis/redis.conf');
    expect(redisScript).toContain('--masterauth');
    const sentinelScript = (sentinel.spec.template.spec.containers[0].command as string[]).at(-1)!;
    expect(sentinelScript).toMatch(/sentinel monitor fleet \$master 6379 2/);
    // Both start-up scripts are valid shell (the image runs them with sh).
    for (const script of [redisScript.replace(/^sh -c /, ''), sentinelScript]) expect(run('sh', ['-n', '-c', script]).status).toBe(0);
    // The apps name every Sentinel pod by its stable name and wait for one replica: a configuration they accept.
    const data = get('ConfigMap', 'agent-fleet-config').data as Record<string, string>;
    const pods = Array.from({ length: 3 }, (_, i) => `redis-sentinel-${i}.${sentinel.spec.serviceName}:26379`);
    expect(data.REDIS_SENTINELS!.split(',')).toEqual(pods);
    const cfg = loadConfig({ ...data, APP_MODE: 'development', MODEL_PROVIDER: 'scripted', REDIS_PASSWORD: 'pw' });
    expect(cfg.REDIS_SENTINEL_MASTER).toBe('fleet');
    expect(cfg.REDIS_MIN_REPLICAS).toBe(1);
  }, TOOL_TIMEOUT_MS);

  it('carries exactly the rules of deploy/prometheus/rules.yml in its PrometheusRule', () => {
    const rules = parse(read('deploy/prometheus/rules.yml')) as Obj;
    const file = rel(K8S_BASE, 'prometheusrule.yaml');
    if (process.env.UPDATE_PROMETHEUSRULE === '1') {
      const pr = {
        apiVersion: 'monitoring.coreos.com/v1',
        kind: 'PrometheusRule',
        metadata: { name: 'agent-fleet', labels: { 'app.kubernetes.io/part-of': 'durable-agent-fleet', 'app.kubernetes.io/component': 'alerts' } },
        spec: { groups: rules.groups },
      };
      const header =
        '# GENERATED from deploy/prometheus/rules.yml: do not edit by hand.\n' +
        '# Regenerate: UPDATE_PROMETHEUSRULE=1 npx vitest run test/deploy/deploy.test.ts\n' +
        '# Add the label your Prometheus ruleSelector matches (e.g. release: kube-prometheus-stack) in an overlay.\n';
      writeFileSync(file, header + stringify(pr, { lineWidth: 0 }));
    }
    const pr = find('PrometheusRule', 'agent-fleet');
    expect(pr, 'k8s/base/prometheusrule.yaml').toBeDefined();
    const onDisk = yamlDocs(`${K8S_BASE}/prometheusrule.yaml`)[0] as Obj;
    const same = isDeepStrictEqual(onDisk.spec.groups, rules.groups);
    expect(same, 'k8s/base/prometheusrule.yaml differs from rules.yml: UPDATE_PROMETHEUSRULE=1 npx vitest run test/deploy/deploy.test.ts').toBe(true);
  });
});
