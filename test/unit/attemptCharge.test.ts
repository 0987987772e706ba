/**
 * What a model attempt is charged (attemptCharge, src/budget/policy.ts): its reported usage, else the bound of how far
 * it got; and how far the AI SDK providers say a failure got (classify's `reach`, src/models/aiSdk.ts).
 */
import { describe, expect, it } from 'vitest';
import { APICallError } from 'ai';
import { attemptCharge } from '../../src/budget/policy.js';
import { reachOf } from '../../src/core/model.js';
import { TimeoutError } from '../../src/core/timeout.js';
import { classify, networkReach } from '../../src/models/aiSdk.js';

const bound = { promptTokens: 900, completionTokens: 1024 };

describe('attemptCharge', () => {
  it('charges the reported usage, whatever the reach', () => {
    const usage = { promptTokens: 10, completionTokens: 2 };
    expect(attemptCharge(usage, 'none', bound)).toBe(usage);
    expect(attemptCharge(usage, 'answer', bound)).toBe(usage);
  });

  it('without usage: nothing when the request never reached the model', () => {
    expect(attemptCharge(undefined, 'none', bound)).toBeUndefined();
  });

  it('without usage: the prompt part when the model read the request and answered no text', () => {
    expect(attemptCharge(undefined, 'prompt', bound)).toEqual({ promptTokens: 900, completionTokens: 0 });
  });

  it('without usage: prompt and completion cap when the model may have generated, or nothing is said', () => {
    expect(attemptCharge(undefined, 'answer', bound)).toEqual(bound);
    expect(attemptCharge(undefined, undefined, bound)).toEqual(bound);
  });

  it("reads an error's reach, and only a known one", () => {
    expect(reachOf({ reach: 'prompt' })).toBe('prompt');
    expect(reachOf({ reach: 'nothing' })).toBeUndefined();
    expect(reachOf(undefined)).toBeUndefined();
  });
});

function apiError(statusCode: number | undefined, over: { cause?: unknown; responseBody?: string } = {}) {
  return new APICallError({
    message: 'x',
    url: 'http://model.test/v1/chat/completions',
    requestBodyValues: {},
    statusCode,
    isRetryable: statusCode === undefined || statusCode >= 500 || statusCode === 429,
    ...over,
  });
}

const reach = (err: unknown) => reachOf(classify(err, 0).details);

describe("the AI SDK providers' reach of a failure", () => {
  it('a refusal before any work reaches nothing: 429, 408, another 4xx, a refused connection, DNS', () => {
    expect(reach(apiError(429))).toBe('none');
    expect(reach(apiError(408))).toBe('none');
    expect(reach(apiError(400))).toBe('none');
    expect(reach(apiError(401))).toBe('none');
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    expect(reach(apiError(undefined, { cause: refused }))).toBe('none');
    const dns = new TypeError('fetch failed', {
      cause: Object.assign(new Error('getaddrinfo'), { code: 'ENOTFOUND' }),
    });
    expect(reach(dns)).toBe('none');
  });

  it('a 5xx read the prompt', () => {
    expect(reach(apiError(500))).toBe('prompt');
    expect(reach(apiError(503))).toBe('prompt');
  });

  it('a timeout, a connection dropped after the request left, an unreadable 2xx may have generated', () => {
    expect(reach(new TimeoutError(1000))).toBe('answer');
    const reset = Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' });
    expect(reach(apiError(undefined, { cause: reset }))).toBe('answer');
    expect(reach(new TypeError('fetch failed', { cause: reset }))).toBe('answer');
    expect(reach(apiError(200, { responseBody: '{"id":"x"}' }))).toBe('answer');
    expect(reach(apiError(200, { responseBody: '{"id":"x","usage":7}' }))).toBe('answer');
    expect(reach(new SyntaxError('bad'))).toBe('answer');
  });

  it('networkReach looks down the cause chain', () => {
    const deep = new Error('a', { cause: new Error('b', { cause: { code: 'EAI_AGAIN' } }) });
    expect(networkReach(deep)).toBe('none');
    expect(networkReach(new Error('plain'))).toBe('answer');
  });
});
