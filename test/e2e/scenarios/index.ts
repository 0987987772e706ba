/** The scenarios by name, with the options the CLI accepts (`--signal=`, `--fault=`). */
import { runEviction } from './eviction.js';
import type { ScenarioResult } from './report.js';
import { runRetryStorm } from './retryStorm.js';
import { runTimeout } from './timeout.js';

export type { ScenarioResult } from './report.js';
export { runEviction } from './eviction.js';
export { runTimeout } from './timeout.js';
export { runRetryStorm } from './retryStorm.js';

export interface ScenarioDef {
  about: string;
  options: string;
  run(args: Map<string, string>, progress?: (line: string) => void): Promise<ScenarioResult>;
}

export const SCENARIOS: Record<string, ScenarioDef> = {
  eviction: {
    about:
      'a worker is evicted at step 12 after creating a ticket and sending an email; another worker resumes the run',
    options: '--signal=SIGKILL (default: the process dies) | --signal=SIGTERM (graceful handoff)',
    run: (args, progress) => {
      const signal = args.get('signal') ?? 'SIGKILL';
      if (signal !== 'SIGKILL' && signal !== 'SIGTERM')
        throw new UsageError(`--signal must be SIGKILL or SIGTERM, not ${signal}`);
      return runEviction({ signal, ...(progress ? { progress } : {}) });
    },
  },
  timeout: {
    about:
      'the email send times out after the service committed it; the ledger reconciles by lookup instead of resending',
    options:
      '--fault=slow_commit (default: a real client timeout) | --fault=lost_response (the answer is lost after the commit)',
    run: (args, progress) => {
      const fault = args.get('fault') ?? 'slow_commit';
      if (fault !== 'slow_commit' && fault !== 'lost_response')
        throw new UsageError(`--fault must be slow_commit or lost_response, not ${fault}`);
      return runTimeout({ fault, ...(progress ? { progress } : {}) });
    },
  },
  'retry-storm': {
    about:
      'the service answers 429 then 201 and the agent keeps asking for the same write; one write, then the loop stop',
    options: '',
    run: (_args, progress) => runRetryStorm(progress ? { progress } : {}),
  },
};

export class UsageError extends Error {}
