/**
 * The crash-test kit (testkit/crashTest.ts) on an agent whose write comes from
 * an MCP server (examples/mcp-booking over the test kit's booking server):
 * real worker processes SIGKILLed at every crash point of the booking step,
 * the server counting bookings per key. It finds the duplicate planted in a
 * server that ignores its key, passes the fixed server, and with the default
 * strategy (none) leaves a doubt with a person, evidence attached.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { crashTest } from '../../testkit/crashTest.js';
import type { CrashPointName } from '../../src/config/testHooks.js';
import { redisUrl } from '../../testkit/harness.js';
import { startMcpHttpServer, type McpHttpHandle } from '../../testkit/mcpServer.js';
import { bookingScript } from '../../examples/mcp-booking/index.js';

const input = { requestId: 'B-1', name: 'Ada', day: 'mon' };
let server: McpHttpHandle;
afterEach(async () => {
  await server.close();
});

const run = (env: Record<string, string> = {}, points?: CrashPointName[]) =>
  crashTest({
    agentsModule: 'examples/mcp-booking/index.ts',
    input,
    script: bookingScript(input),
    redisUrl: redisUrl(),
    ...(points ? { points } : {}),
    service: { env: { BOOKINGS_MCP_URL: server.url, ...env }, effects: () => server.store.effects() },
  });

describe('crashTest on an MCP write tool', () => {
  describe('a server that replays a same-key call (the agent declares a 60 s key window)', () => {
    beforeEach(async () => {
      server = await startMcpHttpServer();
    });
    it('every crash point: exactly once', { timeout: 600_000 }, async () => {
      const report = await run({ BOOKINGS_KEY_WINDOW_MS: '60000' });
      expect(report.failures, report.summary()).toEqual([]);
      expect(report.cases.map((c) => [c.point, c.verdict])).toEqual([
        ['after_decision', 'exactly_once'],
        ['after_reservation', 'exactly_once'],
        ['after_dispatched', 'exactly_once'],
        ['after_call', 'exactly_once'],
        ['after_outcome', 'exactly_once'],
        ['before_commit', 'exactly_once'],
        ['after_commit', 'exactly_once'],
        ['mid_stream', 'exactly_once'],
      ]);
      // Killed with the answer half streamed: the booking made two steps before stays one.
      expect(report.cases.at(-1)).toMatchObject({ tool: 'book_slot', step: 3, status: 'completed', effects: 1 });
    });
  });

  describe('the planted bug: a server that ignores the key', () => {
    beforeEach(async () => {
      server = await startMcpHttpServer({ ignoreKeys: true });
    });
    it('the report names the tool, the crash point and the duplicate', { timeout: 600_000 }, async () => {
      // The points around the call (the others never send twice, whatever the server does).
      const report = await run({ BOOKINGS_KEY_WINDOW_MS: '60000' }, [
        'after_dispatched',
        'after_call',
        'after_outcome',
      ]);
      // Killed after the call: the replay that settles the doubt books again.
      expect(report.duplicates).toEqual([
        expect.objectContaining({ tool: 'book_slot', point: 'after_call', step: 2, effects: 2, verdict: 'duplicate' }),
      ]);
      expect(report.summary()).toContain('book_slot after_call@2: duplicate (2 effect(s), completed)');
    });
  });

  describe('the default strategy (none)', () => {
    beforeEach(async () => {
      server = await startMcpHttpServer();
    });
    it(
      'a request that may have left goes to a person with the evidence; the others are exactly once',
      { timeout: 600_000 },
      async () => {
        const report = await run({}, ['after_reservation', 'after_dispatched', 'after_call', 'after_outcome']);
        expect(report.failures, report.summary()).toEqual([]);
        const withPerson = report.cases.filter((c) => c.verdict === 'with_a_person');
        expect(withPerson.map((c) => c.point)).toEqual(['after_dispatched', 'after_call']);
        for (const c of withPerson) {
          expect(c.effects).toBeLessThanOrEqual(1);
          expect(c.actionState).toBe('needs_human');
          expect(c.evidence).toBeDefined();
        }
      },
    );
  });
});

/** The kit's own guarantees, on test/fixtures/crashKit/booking.ts (the same agent, with a short call timeout). */
describe('crashTest against a service that outlives one call', () => {
  const fixture = (env: Record<string, string>, points: CrashPointName[]) =>
    crashTest({
      agentsModule: 'test/fixtures/crashKit/booking.ts',
      input,
      script: bookingScript(input),
      redisUrl: redisUrl(),
      points,
      service: {
        env: { BOOKINGS_MCP_URL: server.url, ...env },
        effects: () => server.store.effects(),
        idle: () => server.store.openCalls === 0,
      },
    });

  it(
    'an agent that never calls the service does not pass on the effects of an earlier call',
    { timeout: 600_000 },
    async () => {
      server = await startMcpHttpServer();
      const real = await fixture({ BOOKINGS_KEY_WINDOW_MS: '60000' }, ['after_decision']);
      expect(real.cases.map((c) => [c.verdict, c.effects])).toEqual([['exactly_once', 1]]);
      const silent = await fixture({ BOOKINGS_NEVER_CALL: 'true' }, ['after_decision']);
      expect(silent.cases.map((c) => [c.verdict, c.effects])).toEqual([['lost', 0]]);
      expect(silent.cases[0]!.runId).not.toBe(real.cases[0]!.runId);
      expect(server.store.bookings).toHaveLength(1);
    },
  );

  it(
    'a crash point the service kept the run from (an answer lost) is run again, not failed',
    { timeout: 600_000 },
    async () => {
      // The first booking's answer comes after the caller's 1 s timeout: the doubt is settled by a same-key replay,
      // so that run never comes back from a call (after_call). The case's next run is answered.
      server = await startMcpHttpServer({ slowCalls: { count: 1, ms: 3000, commit: 'before' } });
      const report = await fixture({ BOOKINGS_KEY_WINDOW_MS: '60000', BOOKINGS_TIMEOUT_MS: '1000' }, ['after_call']);
      expect(report.failures, report.summary()).toEqual([]);
      expect(report.cases).toEqual([
        expect.objectContaining({ point: 'after_call', verdict: 'exactly_once', effects: 1, attempts: 2 }),
      ]);
    },
  );

  it('counts the effects only once no request of the case is open at the service', { timeout: 600_000 }, async () => {
    // The booking is made 3 s after the request arrived, 2 s after the caller gave up (no key window: a person
    // decides): the run is with a person before the service holds the booking.
    server = await startMcpHttpServer({ slowCalls: { count: 1, ms: 3000, commit: 'after' } });
    const report = await fixture({ BOOKINGS_TIMEOUT_MS: '1000' }, ['after_reservation']);
    expect(report.cases).toEqual([
      expect.objectContaining({ point: 'after_reservation', verdict: 'with_a_person', status: 'needs_human' }),
    ]);
    expect(report.cases[0]!.effects).toBe(1);
    expect(Object.values(server.store.effects())).toEqual([1]);
  });
});
