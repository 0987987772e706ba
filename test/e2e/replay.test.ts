/** The replay harness re-walks a recorded run under other caps, offline, with the worker's pre-flight. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { buildSpec } from '../../src/producer/intake.js';
import { replayRun } from '../../src/runs/replay.js';
import { moduleArgs } from '../../testkit/spawnModule.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness('replay');
  await h.startWorker();
});
afterAll(async () => {
  await h.close();
});

describe('replay harness', () => {
  it('replays a recorded run: same spend under its own caps, an earlier stop under tighter ones', async () => {
    const spec = buildSpec(h.ctx, { tenant: 'acme', ticket: sampleTicket('RP-1') }, Date.now());
    await h.ctx.store.create(spec, Date.now());
    await h.waitForStatus(spec.runId, ['completed']);
    const journal = await h.ctx.store.transcript(spec.runId);
    const state = await h.ctx.store.readState(spec.runId);
    // The agent's input estimate and tools are part of each estimate, as the worker (and the CLI) counts them.
    const agent = h.ctx.agents.get('support')!;
    const base = {
      completionCap: h.cfg.COMPLETION_TOKEN_CAP,
      inputTokens: agent.estimateInputTokens(spec.input),
      tools: agent.tools.specs,
    };
    const same = replayRun(spec, journal, base);
    const decisions = journal.filter((e) => e.kind === 'decision').length;
    expect(decisions).toBeGreaterThan(1);
    expect(same).toMatchObject({ completed: true, stepsReplayed: decisions, tokensSpent: state!.used.tokens });
    const tight = replayRun(spec, journal, { ...base, maxTokens: 4000 });
    expect(tight.completed).toBe(false);
    expect(tight.stoppedAt?.reason).toMatch(/^tokens:/);
    expect(tight.tokensSpent).toBeLessThanOrEqual(4000);
    const steps = replayRun(spec, journal, { ...base, maxSteps: 2 });
    expect(steps.stoppedAt).toMatchObject({ step: 2, status: 'budget_exceeded' });
    // The CLI entry point against the same Redis.
    const cli = spawnSync(
      process.execPath,
      [...moduleArgs('src/server/replay'), spec.runId, '--max-tokens', '4000', '--json'],
      { env: { ...process.env, ...h.env }, encoding: 'utf8' },
    );
    expect(cli.status, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout.trim())).toEqual(tight);
  });

  it('a recorded call that ended past a tighter cap stops the replay there, charged, as the worker would', () => {
    const spec = buildSpec(h.ctx, { tenant: 'acme', ticket: sampleTicket('RP-2') }, Date.now());
    const usage = { promptTokens: 1500, completionTokens: 100 };
    const journal = [
      {
        v: 1 as const,
        kind: 'decision' as const,
        step: 1,
        model: 'scripted',
        toolCalls: [{ id: 'c', name: 'read_ticket', args: {} }],
        usage,
        attempts: 1,
      },
      {
        v: 1 as const,
        kind: 'decision' as const,
        step: 2,
        model: 'scripted',
        toolCalls: [],
        final: 'done',
        usage,
        attempts: 1,
      },
    ];
    const r = replayRun(spec, journal, { completionCap: 100, maxTokens: 1500 });
    expect(r.stoppedAt).toEqual({ step: 1, status: 'budget_exceeded', reason: 'tokens: used 1600 of cap 1500' });
    expect(r).toMatchObject({ stepsReplayed: 0, tokensSpent: 1600, completed: false });
  });
});
