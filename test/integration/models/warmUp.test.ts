/**
 * The boot's model warm-up (src/models/warmUp.ts): each AI SDK provider makes one call through its own SDK code with
 * a fetch that answers in the vendor's wire format, so no request reaches the vendor (the local OpenAI and Anthropic
 * servers count none) and the canned answers parse; the same provider then calls its server as before. The
 * pre-flight's tokenizer is warmed too. A provider whose warm-up fails is logged and the others are warmed; a real
 * worker process logs what it warmed.
 */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAIServer } from '../../../testkit/modelServers/openai.js';
import { startAnthropicServer } from '../../../testkit/modelServers/anthropic.js';
import type { ModelServer } from '../../../testkit/modelServers/queue.js';
import { anthropicProvider, openAICompatibleProvider, type AiSdkProvider } from '../../../src/models/aiSdk.js';
import { OpenAIProvider } from '../../../src/models/openai.js';
import { ScriptedProvider } from '../../../src/models/scripted.js';
import { warmUpModelCalls, warmUpRequest } from '../../../src/models/warmUp.js';
import { createLogger } from '../../../src/metrics/log.js';
import type { ModelProvider } from '../../../src/core/model.js';
import { createHarness, type Harness } from '../../../testkit/harness.js';
import { spawnWorker, type WorkerProcess } from '../../../testkit/processes.js';
import { createFleet } from '../../../src/fleet.js';
import { leadQualifier } from '../../../examples/lead-qualifier/index.js';
import { until } from '../../../testkit/until.js';

let openai: ModelServer;
let compat: ModelServer;
let anthropic: ModelServer;

beforeAll(async () => {
  [openai, compat, anthropic] = await Promise.all([startOpenAIServer(), startOpenAIServer(), startAnthropicServer()]);
});
afterAll(async () => {
  await Promise.all([openai, compat, anthropic].map((s) => s.close()));
});

function providers(): [AiSdkProvider, ModelServer][] {
  const common = { timeoutMs: 5000 };
  return [
    [new OpenAIProvider({ ...common, baseUrl: `${openai.url}/v1`, apiKey: 'sk-test', model: 'gpt-test' }), openai],
    [openAICompatibleProvider({ ...common, baseUrl: `${compat.url}/v1`, model: 'llama-test' }), compat],
    [
      anthropicProvider({ ...common, baseUrl: `${anthropic.url}/v1`, apiKey: 'ak-test', model: 'claude-test' }),
      anthropic,
    ],
  ];
}

function capturedLog() {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  return { log: createLogger('warm-up-test', 'info', sink), lines };
}

describe('a provider warm-up', () => {
  it('goes through each vendor SDK without a request reaching the vendor; the provider then calls its server', async () => {
    for (const [p, server] of providers()) {
      const before = server.requests.length;
      await p.warm();
      expect(server.requests.length, `${p.name}: the warm-up sent nothing`).toBe(before);
      const turn = await p.complete({ ...warmUpRequest(), prompt: 'hello' });
      expect(server.requests.length, `${p.name}: a real call still reaches its server`).toBe(before + 1);
      expect(turn.usage).toBeDefined();
    }
  });

  it('warms every warmable provider and the HTTP client; a failing one is logged, the others are still warmed', async () => {
    const all = providers();
    const openaiProvider = all[0]![0];
    const compatProvider = all[1]![0];
    const broken: ModelProvider = {
      name: 'broken',
      needsTranscript: false,
      complete: () => Promise.reject(new Error('not called')),
      warm: () => Promise.reject(new Error('canned answer did not parse')),
    };
    const map = new Map<string, ModelProvider>([
      ['scripted', new ScriptedProvider()],
      ['openai', openaiProvider],
      ['openai-compatible', compatProvider],
      ['broken', broken],
    ]);
    const { log, lines } = capturedLog();
    const warmed = await warmUpModelCalls(map, log);
    expect(warmed.sort()).toEqual(['http', 'openai', 'openai-compatible', 'tokenizer']);
    expect(lines.filter((l) => l.code === 'warm_up_failed').map((l) => l.provider)).toEqual(['broken']);
  });

  it('warms the tokenizer only when no provider can be warmed (the scripted one only)', async () => {
    const { log, lines } = capturedLog();
    expect(await warmUpModelCalls(new Map([['scripted', new ScriptedProvider()]]), log)).toEqual(['tokenizer']);
    expect(lines).toEqual([]);
  });
});

describe('a worker process', () => {
  let h: Harness;
  let w: WorkerProcess | undefined;
  beforeAll(async () => {
    h = await createHarness('warmup', {
      OPENAI_COMPATIBLE_BASE_URL: `${compat.url}/v1`,
      OPENAI_COMPATIBLE_MODEL: 'llama-test',
    });
  });
  afterAll(async () => {
    if (w?.child.exitCode === null) w.child.kill('SIGKILL');
    await h.close();
  });

  it('warms its providers before it starts taking jobs, and says so', async () => {
    const before = compat.requests.length;
    w = await spawnWorker(h.env);
    const started = JSON.parse(w.lines.find((l) => l.includes('"worker_started"'))!) as { warmed: string[] };
    expect(started.warmed.sort()).toEqual(['http', 'openai-compatible', 'tokenizer']);
    expect(compat.requests.length).toBe(before);
  });
});

describe('an embedded fleet (createFleet)', () => {
  it("warms its providers as its worker starts: a team's own provider with warm() is called once", async () => {
    const h = await createHarness('warmupfleet');
    let warmed = 0;
    const own: ModelProvider = {
      name: 'own',
      needsTranscript: false,
      complete: () => Promise.reject(new Error('not called')),
      warm: () => Promise.resolve(void warmed++),
    };
    const fleet = await createFleet({
      agents: [leadQualifier({ baseUrl: 'http://127.0.0.1:1' })],
      config: h.env,
      providers: { scripted: new ScriptedProvider(), own },
    });
    try {
      expect(warmed).toBe(0);
      fleet.worker.start();
      await until('the warm-up', 5000, () => Promise.resolve(warmed > 0));
      expect(warmed).toBe(1);
    } finally {
      await fleet.close();
      await h.close();
    }
  });
});
