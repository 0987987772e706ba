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
