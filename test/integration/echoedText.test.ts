/**
 * A 400 names the field, never echoes what the sender wrote in it: an agent name out of format is a field error
 * (not `agent '<b>x</b>' is not run by this deployment`), and an unknown field is refused at its object's path, its
 * name shown only when it is a plain name (not zod's `Unrecognized key: "<its text>"`). Through the real API.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, producerAuth, sampleTicket, type Harness } from '../../testkit/harness.js';

const EVIL = '<b>x</b>';
const EVIL_KEY = '<script>alert(1)</script>';
let h: Harness;
let url: string;
beforeAll(async () => {
  h = await createHarness('echoedText');
  url = (await h.startApi()).url;
});
afterAll(async () => {
  await h.close();
});

async function send(method: string, path: string, body: unknown) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...producerAuth },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, body: JSON.parse(text) as { fields: { path: string; message: string }[] } };
}

describe('refusals name the field and leave out the sent text', () => {
  it('an agent name out of format is a field error naming `agent`, on every intake', async () => {
    for (const [method, path, body] of [
      ['POST', '/v1/runs', { tenant: 'acme', agent: EVIL, input: {} }],
      ['PUT', '/v1/schedules/nightly', { tenant: 'acme', agent: EVIL, cron: '0 3 * * *', input: {} }],
      ['POST', '/v1/events', { tenant: 'acme', agent: EVIL, key: 'reply:1', payload: {} }],
    ] as const) {
      const res = await send(method, path, body);
      expect(res.status, path).toBe(400);
      expect(
        res.body.fields.map((f) => f.path),
        path,
      ).toEqual(['agent']);
      expect(res.text, path).not.toContain('<b>');
    }
  });

  it('an unknown field is refused at its object’s path; a plain name is shown, other text never', async () => {
    const run = { tenant: 'acme', agent: 'support', input: sampleTicket('ET-1') };
    for (const [method, path, body, where] of [
      ['POST', '/v1/runs', { ...run, [EVIL_KEY]: 1, extra: 2 }, '(body)'],
      ['POST', '/v1/runs', { ...run, input: { ...run.input, [EVIL_KEY]: 1, extra: 2 } }, 'input'],
      [
        'POST',
        '/v1/events',
        { tenant: 'acme', agent: 'support', key: 'k', payload: 1, [EVIL_KEY]: 1, extra: 2 },
        '(body)',
      ],
    ] as const) {
      const res = await send(method, path, body);
      expect(res.status, path).toBe(400);
      expect(res.body.fields, path).toEqual([
        { path: where, message: 'Unrecognized keys: (a name not shown), "extra"' },
      ]);
      expect(res.text, path).not.toContain('script');
    }
  });
});
