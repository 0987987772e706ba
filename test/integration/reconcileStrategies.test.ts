/**
 * The reconciliation strategies as a pure policy (no Redis, no HTTP): a fake
 * ledger records the move, fake tools answer lookups and replays. What the
 * ledger does with each answer of each method, in order, and when it stops.
 */
import { describe, expect, it } from 'vitest';
import { reconcile, type ReconcileDeps } from '../../src/ledger/reconcile.js';
import { NotReplicatedError } from '../../src/store/replicated.js';
import type { ActionRecord, Ledger } from '../../src/ledger/ledger.js';
import type { DispatchReceipt, LookupResult, ReconcileMethod, ToolContext, WriteTool } from '../../src/core/tool.js';
import { KeyConflictError, RetryableError } from '../../src/core/errors.js';
import { OutcomeUnknownError } from '../../src/core/httpJson.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { pino } from 'pino';
import { z } from 'zod';

const NOW = 1_000_000;
const SILENT = pino({ level: 'silent' });

function rec(over: Partial<ActionRecord> = {}): ActionRecord {
  return {
    actionId: 'a_1',
    runId: 'r_1',
    step: 1,
    callId: 'c',
    tool: 'write',
    state: 'outcome_unknown',
    idempotencyKey: 'k',
    requestId: 'rq',
    fingerprint: 'f',
    args: { x: 1 },
    attempts: 1,
    repeats: 0,
    createdAt: NOW,
    updatedAt: NOW,
    replayUntil: NOW + 60_000,
    ...over,
  };
}

function harness(
  reconcileWith: ReconcileMethod[],
  answers: { lookup?: (LookupResult | Error)[]; replay?: (DispatchReceipt | Error)[] },
) {
  const moves: { to: string; why: string; evidence: unknown; set: Record<string, string> }[] = [];
  const calls: string[] = [];
  const ledger = {
    async transition(
      _r: string,
      _a: string,
      _from: string,
      to: string,
      ev: { why: string; evidence?: unknown },
      set: Record<string, string> = {},
    ) {
      moves.push({ to, why: ev.why, evidence: ev.evidence, set });
    },
  } as unknown as Ledger;
  const next = <T>(list: (T | Error)[] | undefined, what: string): T => {
    const a = list?.shift();
    if (a === undefined) throw new Error(`no ${what} answer left`);
    if (a instanceof Error) throw a;
    return a;
  };
  const tool: WriteTool = {
    name: 'write',
    description: 'w',
    effect: 'write',
    args: z.object({ x: z.number() }),
    timeoutMs: 100,
    service: { enforcesKey: true, reconcile: reconcileWith },
    async dispatch(args, _ctx, req) {
      calls.push(`replay ${JSON.stringify(args)} ${req.idempotencyKey}`);
      return next(answers.replay, 'replay');
    },
    async lookup(_ctx, req) {
      calls.push(`lookup ${req.actionId}`);
      return next(answers.lookup, 'lookup');
    },
  };
  const metrics = newMetrics();
  const ctx: ToolContext = { runId: 'r_1', step: 1, signal: new AbortController().signal, input: {} };
  let clock = NOW;
  const run = (r = rec(), deadlineMs = 1000, replicate?: ReconcileDeps['replicate']) =>
    reconcile(
      {
        ledger,
        metrics,
        log: SILENT,
        deadlineMs,
        pollMs: 10,
        minAttemptMs: 50,
        now: () => (clock += 5),
        ...(replicate ? { replicate } : {}),
      },
      r,
      tool,
      ctx,
      'test',
    );
  return { run, moves, calls, metrics };
}

const receipt = (id: string, replayed = false): DispatchReceipt => ({ receipt: id, output: { id }, replayed });

describe('reconciliation strategies', () => {
  it('none (no method): to a person at once, nothing asked', async () => {
    const h = harness([], {});
    expect(await h.run()).toBe('needs_human');
    expect(h.calls).toEqual([]);
    expect(h.moves[0]!.why).toMatch(/no way to settle/);
  });

  it('lookup, then replay: found by lookup confirms without a re-send', async () => {
    const h = harness([{ kind: 'lookup' }, { kind: 'replay_same_key', windowMs: 1 }], {
      lookup: [{ status: 'committed', receipt: 'T1', output: {}, evidence: {}, effects: 2 }],
    });
    expect(await h.run()).toBe('confirmed');
    expect(h.calls).toEqual(['lookup a_1']);
    expect(h.moves[0]!.set.receipt).toBe('T1');
    expect((await h.metrics.duplicateWrites.get()).values[0]?.value).toBe(1);
  });

  it('lookup absent proves nothing: the identical request is re-sent with the same key inside the window', async () => {
    const h = harness([{ kind: 'lookup' }, { kind: 'replay_same_key', windowMs: 1 }], {
      lookup: [{ status: 'absent', evidence: {} }],
      replay: [receipt('T2', true)],
    });
    expect(await h.run()).toBe('confirmed');
    expect(h.calls).toEqual(['lookup a_1', 'replay {"x":1} k']);
    expect(h.moves[0]).toMatchObject({
      to: 'confirmed',
      evidence: { replay: true, replayed: true },
      set: { receipt: 'T2' },
    });
  });

  it('no replay leaves before the action is on the replicas: the wait falls short, then holds, then one replay', async () => {
    const h = harness([{ kind: 'replay_same_key', windowMs: 1 }], { replay: [receipt('T3')] });
    const waits: string[] = [];
    const replicate: ReconcileDeps['replicate'] = async (r, state) => {
      waits.push(`${r.actionId} ${state} ${h.calls.length}`);
      if (waits.length < 3) throw new NotReplicatedError(0, 1, 1000);
    };
    expect(await h.run(rec(), 1000, replicate)).toBe('confirmed');
    expect(waits).toEqual(['a_1 outcome_unknown 0', 'a_1 outcome_unknown 0', 'a_1 outcome_unknown 0']);
    expect(h.calls).toEqual(['replay {"x":1} k']);
  });

  it('past the window no replay is sent: the next method, and with none left a person, with the reason', async () => {
    const past = rec({ replayUntil: NOW - 1 });
    const onlyReplay = harness([{ kind: 'replay_same_key', windowMs: 1 }], {});
    expect(await onlyReplay.run(past)).toBe('needs_human');
    expect(onlyReplay.calls).toEqual([]);
    expect(onlyReplay.moves[0]!.why).toMatch(/key window ended/);

    const thenLookup = harness([{ kind: 'replay_same_key', windowMs: 1 }, { kind: 'lookup' }], {
      lookup: [{ status: 'committed', receipt: 'R1', output: {}, evidence: {} }],
    });
    expect(await thenLookup.run(past)).toBe('confirmed');
    expect(thenLookup.calls).toEqual(['lookup a_1']);

    const noWindow = harness([{ kind: 'replay_same_key', windowMs: 1 }], {});
    const { replayUntil: _omit, ...withoutWindow } = rec();
    expect(await noWindow.run(withoutWindow as ActionRecord)).toBe('needs_human');
    expect(noWindow.calls).toEqual([]);
  });

  it('a replay answered "same key, other body" is a conflict: to a person, never retried', async () => {
    const h = harness([{ kind: 'replay_same_key', windowMs: 1 }], {
      replay: [new KeyConflictError('held for another request')],
    });
    expect(await h.run()).toBe('needs_human');
    expect(h.calls).toHaveLength(1);
    expect(h.moves[0]!.why).toMatch(/conflict/);
  });

  it('"still in progress", a lost answer or a 429 on the replay: wait and replay again until it answers', async () => {
    const h = harness([{ kind: 'replay_same_key', windowMs: 1 }], {
      replay: [
        new OutcomeUnknownError('busy', { reason: 'in_progress' }),
        new OutcomeUnknownError('reset'),
        new RetryableError('429'),
        receipt('E1'),
      ],
    });
    expect(await h.run()).toBe('confirmed');
    expect(h.calls).toHaveLength(4);
  });

  it('a lookup that keeps finding nothing, with no other method: a person at the deadline, not a re-send', async () => {
    const h = harness([{ kind: 'lookup' }], {
      lookup: Array.from({ length: 100 }, () => ({ status: 'absent', evidence: {} })),
    });
    expect(await h.run(rec(), 200)).toBe('needs_human');
    expect(h.calls.every((c) => c.startsWith('lookup'))).toBe(true);
    expect(h.moves[0]!.why).toMatch(/undecidable/);
  });

  it('absent and proven stopped allows one safe retry, until the dispatch attempts are used', async () => {
    const h = harness([{ kind: 'lookup' }], {
      lookup: [
        { status: 'absent_stopped', evidence: {} },
        { status: 'absent_stopped', evidence: {} },
      ],
    });
    expect(await h.run()).toBe('safe_retry');
    expect(await h.run(rec({ attempts: 3 }))).toBe('needs_human');
  });
});

describe('the last attempt before a person decides', () => {
  /** A lookup that answers `processing` until the deadline and records the timeout each call was given. */
  function slowService(toolTimeoutMs: number) {
    const timeouts: number[] = [];
    const moves: { to: string; why: string; evidence: unknown }[] = [];
    const ledger = {
      async transition(_r: string, _a: string, _f: string, to: string, ev: { why: string; evidence?: unknown }) {
        moves.push({ to, why: ev.why, evidence: ev.evidence });
      },
    } as unknown as Ledger;
    const tool: WriteTool = {
      name: 'write',
      description: 'w',
      effect: 'write',
      args: z.object({ x: z.number() }),
      timeoutMs: toolTimeoutMs,
      service: { enforcesKey: true, reconcile: [{ kind: 'lookup' }] },
      async dispatch() {
        throw new Error('no dispatch in a lookup');
      },
      async lookup(_ctx, req) {
        timeouts.push(req.timeoutMs);
        // The service answers within any timeout it is given: still processing, this is call n.
        return { status: 'processing', evidence: { answer: 'processing', call: timeouts.length } };
      },
    };
    const ctx: ToolContext = { runId: 'r_1', step: 1, signal: new AbortController().signal, input: {} };
    return { ledger, tool, ctx, timeouts, moves };
  }

  for (const notAfter of [undefined, NOW + 1000]) {
    it(`gets at least minAttemptMs (or the tool's own timeout), never what the clamp leaves (${notAfter ? 'in a step' : 'the sweeper'})`, async () => {
      const s = slowService(5000);
      let clock = NOW;
      const outcome = await reconcile(
        {
          ledger: s.ledger,
          metrics: newMetrics(),
          log: SILENT,
          deadlineMs: 1000,
          pollMs: 10,
          minAttemptMs: 2000,
          ...(notAfter !== undefined ? { notAfter } : {}),
          now: () => (clock += 7),
        },
        rec({ replayUntil: undefined }),
        s.tool,
        s.ctx,
        'test',
      );
      expect(outcome).toBe('needs_human');
      expect(s.timeouts.length).toBeGreaterThan(1);
      expect(Math.min(...s.timeouts)).toBeGreaterThanOrEqual(2000);
      // What the person reads is the service's own last answer, not a timeout the clamp made.
      expect(s.moves).toHaveLength(1);
      expect(JSON.stringify(s.moves[0]!.evidence)).toContain(`"call":${s.timeouts.length}`);
      expect(JSON.stringify(s.moves[0]!.evidence)).not.toMatch(/timed out/);
    });
  }

  it('a tool whose own timeout is shorter than the minimum keeps it', async () => {
    const s = slowService(300);
    let clock = NOW;
    await reconcile(
      {
        ledger: s.ledger,
        metrics: newMetrics(),
        log: SILENT,
        deadlineMs: 1000,
        pollMs: 10,
        minAttemptMs: 2000,
        now: () => (clock += 7),
      },
      rec({ replayUntil: undefined }),
      s.tool,
      s.ctx,
      'test',
    );
    expect(new Set(s.timeouts)).toEqual(new Set([300]));
  });
});
