/**
 * Boot of a process. A failure before it serves (bad configuration, no REDIS_URL, Redis
 * unreachable or unsafe, a port in use) prints one line on stderr naming the problem and exits
 * 1: no stack trace, no endless retry loop. Once booted, Redis connections reconnect as usual.
 */
import { refuseUnsupportedNode } from './nodeVersion.js';

export { listen, PortInUseError } from '../http/listen.js';

export const BOOT_FAILED_EXIT_CODE = 1;

/** The one line a failed boot prints: `<process>: cannot start: <problem>`. */
export function bootFailureLine(processName: string, err: unknown): string {
  const e = err as { code?: unknown; message?: unknown } | undefined;
  const message = typeof e?.message === 'string' && e.message ? e.message : String(err);
  const code = typeof e?.code === 'string' ? ` [${e.code}]` : '';
  return `${processName}: cannot start: ${message.replace(/\s*\n\s*/g, ' ')}${code}`;
}

export function failBoot(processName: string, err: unknown): never {
  process.stderr.write(`${bootFailureLine(processName, err)}\n`);
  process.exit(BOOT_FAILED_EXIT_CODE);
}

/**
 * Runs a process's start-up; any failure runs `cleanup` (best effort) and ends the process with one line (failBoot).
 */
export async function boot<T>(
  processName: string,
  start: () => Promise<T>,
  cleanup?: () => Promise<unknown>,
): Promise<T> {
  refuseUnsupportedNode(processName);
  try {
    return await start();
  } catch (err) {
    await cleanup?.().catch(() => {});
    failBoot(processName, err);
  }
}
