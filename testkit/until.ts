/**
 * Waiting for something a test cannot be told about: polls a probe until it gives a value. One helper for every test
 * and kit module, so each wait reads the same way and fails the same way (naming what it waited for).
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Polls `probe` every `everyMs` until it gives a value (anything but undefined, null or false) and returns it;
 * throws `timed out waiting for <what>` past `timeoutMs`. A probe that throws fails the wait: a probe that may
 * meet a node going down catches that itself.
 */
export async function until<T>(
  what: string,
  timeoutMs: number,
  probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  everyMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== null && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}
