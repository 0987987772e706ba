import { describe, expect, it } from 'vitest';
import { PassLoop } from '../../src/core/passLoop.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A pass that counts itself and, while it runs, how many passes run at once. */
function countingPass(opts: { ms?: number; failEvery?: number } = {}) {
  const seen = { passes: 0, inFlight: 0, mostAtOnce: 0 };
  const pass = async () => {
    seen.passes++;
    seen.inFlight++;
    seen.mostAtOnce = Math.max(seen.mostAtOnce, seen.inFlight);
    try {
      await sleep(opts.ms ?? 0);
      if (opts.failEvery && seen.passes % opts.failEvery === 0) throw new Error(`pass ${seen.passes} failed`);
    } finally {
      seen.inFlight--;
    }
  };
  return { seen, pass };
}

const until = async (what: () => boolean) => {
  for (let i = 0; i < 500 && !what(); i++) await sleep(2);
  expect(what()).toBe(true);
};

describe('PassLoop', () => {
  it('goes on after a pass that throws, each failure reported once', async () => {
    const { seen, pass } = countingPass({ failEvery: 2 });
    const errors: unknown[] = [];
    const loop = new PassLoop({ pass, intervalMs: 1, onError: (e) => errors.push(e) });
    loop.start();
    await until(() => seen.passes >= 6);
    await loop.stop();
    expect(errors.length).toBe(Math.floor(seen.passes / 2));
    expect((errors[0] as Error).message).toBe('pass 2 failed');
  });

  it('never runs two passes at once, a slow pass or not', async () => {
    const { seen, pass } = countingPass({ ms: 15 });
    const loop = new PassLoop({ pass, intervalMs: 0, onError: () => {} });
    loop.start();
    loop.start(); // a second start changes nothing
    await until(() => seen.passes >= 4);
    await loop.stop();
    expect(seen.mostAtOnce).toBe(1);
  });

  it('stop waits for the pass in flight, and no pass starts after it', async () => {
    const { seen, pass } = countingPass({ ms: 30 });
    const loop = new PassLoop({ pass, intervalMs: 0, onError: () => {} });
    loop.start();
    expect(seen.inFlight).toBe(1);
    expect(loop.running).toBe(true);
    await loop.stop();
    expect(seen.inFlight).toBe(0);
    expect(loop.running).toBe(false);
    const passes = seen.passes;
    await sleep(40);
    loop.start(); // stopped for good
    await sleep(10);
    expect(seen.passes).toBe(passes);
  });

  it('waits one interval before its first pass when asked to, and a stop in the pause runs none', async () => {
    const { seen, pass } = countingPass();
    const late = new PassLoop({ pass, intervalMs: 20, onError: () => {}, pauseFirst: true, unref: true });
    late.start();
    expect(seen.passes).toBe(0);
    await until(() => seen.passes === 1);
    await late.stop();

    const { seen: never, pass: neverPass } = countingPass();
    const stopped = new PassLoop({ pass: neverPass, intervalMs: 20, onError: () => {}, pauseFirst: true });
    stopped.start();
    await stopped.stop();
    await sleep(40);
    expect(never.passes).toBe(0);
  });

  it('reads a function interval before each pause', async () => {
    const { seen, pass } = countingPass();
    let asked = 0;
    const loop = new PassLoop({
      pass,
      intervalMs: () => {
        asked++;
        return 1;
      },
      onError: () => {},
    });
    loop.start();
    await until(() => seen.passes >= 3);
    await loop.stop();
    expect(asked).toBeGreaterThanOrEqual(seen.passes - 1);
  });
});
