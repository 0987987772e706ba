/**
 * The dependency rules (`npm run depcruise`, part of `npm test`): dependencies
 * point one way, entry points -> producer, agents, models -> the engine (core,
 * store, budget, runs, worker, ledger, in that order), and nothing in src/ reaches
 * the test doubles. test/integration/dependencyRules.test.ts plants a violation of each
 * rule in a scratch tree and shows depcruise refusing it.
 * Type-only imports count (tsPreCompilationDeps): a type is a dependency too.
 * Decision record 0013: docs/decisions/0013-the-engine-layers-in-order.md.
 */
/**
 * The layers of src/, lowest first: each imports only the layers before it. core is what agents build on (ports,
 * define*, errors, the leaf constants every layer shares: statuses, hard limits, provider names); config reads the
 * environment into one frozen object; the store holds the keys, scripts and queues; metrics name what is counted;
 * the budget reads the store; flow control admits runs and paces models; a run is built from all of them; the worker
 * steps a run, and the ledger implements the effect port the worker declares (src/worker/effects.ts), so the step
 * never reaches into the ledger's machinery; run operations (cancel, retry, approve, resolve, continue) use them all; the archive (PostgreSQL) copies ended runs
 * and erases a customer's text from both stores.
 * Above the engine: MCP tools and model providers (built on core), the
 * agents, the producer (intake), the HTTP layer, the client of that API (src/client: its types from the API's schemas),
 * and the composition root (src/server) on top.
 */
const LAYERS = [
  {
    folder: 'core',
    owns: 'what agents build on: define*, the ports (tool, model), errors, httpJson, the journal, statuses, hard limits, provider names',
  },
  {
    folder: 'config',
    owns: 'the configuration schema (one frozen object from the environment), the agents-module shape, test hooks',
  },
  {
    folder: 'store',
    owns: 'connections, keys (the one module naming keys), the run record, shard queues, Lua scripts and their typed calls, BullMQ internals',
  },
  { folder: 'metrics', owns: 'prom-client metrics on a registry passed in, logs (redaction), tracing' },
  { folder: 'budget', owns: 'limits and usage compared: the step pre-flight, the tenant day' },
  { folder: 'flow', owns: 'flow control: tenant lines, slots and weights; model rate limits' },
  {
    folder: 'runs',
    owns: "a run's life: spec, creation, state, stop, resume, retry, waits, children, versions, stuck runs, replay",
  },
  {
    folder: 'worker',
    owns: 'the step (load, decide, act, commit), the BullMQ worker, SIGTERM hand-off, the owner watch',
  },
  {
    folder: 'ledger',
    owns: 'the effect ledger: identity, states, reserve and dispatch, reconcile, approvals, compensation',
  },
  {
    folder: 'operations',
    owns: 'what a person does to a run (cancel, retry, approve, resolve, continue a version): typed outcomes',
  },
  {
    folder: 'archive',
    owns: 'the record kept past retention: the PostgreSQL archive (migrations, archiver, reads) and erasure',
  },
  { folder: 'mcp', owns: 'tools from MCP servers, on core only' },
  { folder: 'models', owns: 'model providers (scripted; the AI SDK for OpenAI, Anthropic, OpenAI-compatible servers)' },
  { folder: 'agents', owns: 'the built-in agents module (support), on the public API' },
  { folder: 'producer', owns: 'intake: request schemas, run creation, events, webhooks, schedules, the model chosen' },
  { folder: 'http', owns: "the HTTP API, auth, the run view, operators' routes, the console, OpenAPI" },
  {
    folder: 'client',
    owns: "producers' and operators' typed client over the HTTP API (types only from the layers below)",
  },
  {
    folder: 'server',
    owns: 'the composition root: api, worker, reconciler, agentctl, replay, createFleet, the agents loader',
  },
];

/** One rule per layer: nothing in it imports a layer above it. */
const FOLDERS = LAYERS.map((l) => l.folder);
const layerRules = FOLDERS.slice(0, -1).map((layer, i) => ({
  name: `layer-${layer}`,
  severity: 'error',
  comment: `Layers in order (${FOLDERS.join(' <- ')}): src/${layer} imports no layer above it.`,
  from: { path: `^src/${layer}/` },
  to: { path: `^src/(${FOLDERS.slice(i + 1).join('|')})/` },
}));

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...layerRules,
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle makes two modules one: neither can be read, tested or moved alone.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'engine-knows-no-agent',
      severity: 'error',
      comment:
        'The engine (core, runs, worker, ledger, store) is given agents and providers; it never imports agents, models, the producer, entry points or anything outside src/.',
      from: { path: '^src/(core|budget|runs|worker|ledger|store|flow)/' },
      to: {
        path: '^(src/(agents|models|producer|http|server|mcp)/|src/(index|fleet)\\.ts$|sandbox/|testkit/|test/|demo/|examples/|bench/)',
      },
    },
    {
      name: 'mcp-builds-on-core',
      severity: 'error',
      comment:
        'src/mcp turns MCP servers into tools: it uses what any agent author uses (src/core), nothing of the machinery.',
      from: { path: '^src/mcp/' },
      to: { path: '^src/', pathNot: '^src/(core|mcp)/' },
    },
    {
      name: 'composition-root-is-a-leaf',
      severity: 'error',
      comment:
        'src/server builds the context, providers and fleet and starts the processes: nothing in src/ imports it but the fleet entry of the package (src/fleet.ts, createFleet).',
      from: { path: '^src/', pathNot: '^src/(server/|fleet\\.ts$)' },
      to: { path: '^src/server/' },
    },
    {
      name: 'client-runs-no-engine',
      severity: 'error',
      comment:
        "src/client (durable-agent-fleet/client) runs in a producer's process: it takes its types from the API's schemas (type-only imports) and at run time only the webhook signature and the run statuses, never the engine.",
      from: { path: '^src/client/' },
      to: {
        path: '^src/',
        pathNot: '^src/(client/|producer/webhookSignature\\.ts$|core/status\\.ts$)',
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'src-knows-no-test-double',
      severity: 'error',
      comment: 'Production code never imports the sandbox, the test kit, tests, the demo, examples or benchmarks.',
      from: { path: '^src/' },
      to: { path: '^(sandbox|testkit|test|demo|examples|bench)/' },
    },
    {
      name: 'unit-tests-need-no-services',
      severity: 'error',
      comment: 'test/unit is the fast tier (npm run test:unit): it reaches no Redis, sandbox or harness.',
      from: { path: '^test/unit/' },
      to: { path: '^(testkit|sandbox|test/(support|integration|e2e|deploy))/' },
    },
    {
      name: 'core-stands-alone',
      severity: 'error',
      comment: 'src/core is what agents build on (ports, define*, errors): it imports no other src folder.',
      from: { path: '^src/core/' },
      to: { path: '^src/', pathNot: '^src/core/' },
    },
    {
      name: 'no-unresolvable',
      severity: 'error',
      comment: 'An import that resolves to nothing is a broken build waiting to happen.',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.json', '.d.ts'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};

// What each layer owns, lowest first: scripts/layoutDocs.ts draws docs/architecture.md's Layout from it. Not
// enumerable, so depcruise's own configuration schema (which allows no other keys) does not see it.
Object.defineProperty(module.exports, 'layers', { value: LAYERS, enumerable: false });
