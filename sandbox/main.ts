/**
 * CLI entry of the sandbox service. Reads SANDBOX_PORT (default 4010),
 * SANDBOX_HOST (default 127.0.0.1) and SANDBOX_SEED (default 1); a bad value
 * fails at boot with the field named. Stops on SIGTERM/SIGINT.
 */
import { pino } from 'pino';
import { z } from 'zod';
import { failBoot, PortInUseError } from '../src/server/boot.js';
import { startSandbox } from './server.js';

const envSchema = z.object({
  SANDBOX_PORT: z.coerce.number().int().min(0).max(65535).default(4010),
  SANDBOX_HOST: z.string().min(1).default('127.0.0.1'),
  /** Seed of the fault PRNG: same seed and request order, same faults. */
  SANDBOX_SEED: z.coerce.number().int().default(1),
});

const log = pino({ name: 'sandbox' });

const parsed = envSchema.safeParse(process.env);
if (!parsed.success) {
  failBoot('sandbox', {
    code: 'config_invalid',
    message: `invalid configuration: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
  });
}
const config = Object.freeze(parsed.data);

const sandbox = await startSandbox({
  port: config.SANDBOX_PORT,
  host: config.SANDBOX_HOST,
  seed: config.SANDBOX_SEED,
}).catch((err: unknown) =>
  failBoot(
    'sandbox',
    (err as NodeJS.ErrnoException).code === 'EADDRINUSE'
      ? new PortInUseError(config.SANDBOX_PORT, 'SANDBOX_PORT', { cause: err })
      : err,
  ),
);
log.info({ url: sandbox.url, seed: config.SANDBOX_SEED }, 'sandbox_listening');

let stopping = false;
const stop = (signal: NodeJS.Signals) => {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'sandbox_stopping');
  sandbox.close().then(
    () => process.exit(0),
    (err: unknown) => {
      log.error({ err }, 'sandbox_close_failed');
      process.exit(1);
    },
  );
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
