/**
 * agentctl (`agent-fleet ctl`): the operator's command line, on durable-agent-fleet/client (src/client).
 * Its help (HELP below, `agentctl --help`) lists every command; docs/operations.md and docs/client.md say more.
 * Exit code 0 on a 2xx answer (printed as JSON), 1 on a refusal (its JSON body) or when the API cannot be reached or
 * refuses the credential (one line on stderr naming the cause and the fix), 2 on a mistake in the command line.
 */
import { parseArgs } from 'node:util';
import {
  AuthNotConfigured,
  FleetApiError,
  FleetClient,
  StoreUnavailable,
  Unauthorized,
  Unreachable,
} from '../client/index.js';
import { isActionId, isRunId } from '../store/keys.js';
import { refuseUnsupportedNode } from './nodeVersion.js';
import { DEFAULT_TIMEOUT_MS, DEFAULT_URL } from './agentctlDefaults.js';

/**
 * Attempts per request, the first included: a person or a script at a terminal learns of a hung or absent API in
 * about this many timeouts, where the client's default (6 of 30 s) is a producer's patience.
 */
export const ATTEMPTS = 3;

export const HELP = `usage: agentctl <command> [arguments] [--url URL] [--token TOKEN] [--timeout MS]
       (also: agent-fleet ctl <command> ...)

commands:
  runs [--status S] [--tenant T] [--agent A] [--since T] [--until T] [--limit N] [--cursor C]
                                      runs, newest status change first (nextCursor pages on);
                                      --since/--until: last status change, epoch ms or ISO 8601
  run <runId>                         the run view
  events <runId> [--from EVENT_ID]    live events, resumed after a cut connection; --from: after that event
  cancel <runId>                      cancel a run
  retry <runId> [--steps N] [--tokens N] [--wall-ms N] [--cost MICROS]
                                      a failed / budget_exceeded / needs_human run goes on from its last commit
  approvals                           pending approvals (exact args, fingerprint, expiry)
  approve|reject <actionId> --fingerprint F
                                      decide an approval (recorded under the token's operator)
  reconciliations                     the human queue with evidence
  resolve <actionId> confirmed|not_sent|compensate|accept [--receipt R] [--evidence JSON]
  versions [list] [--limit N]         runs parked for a version change, with the versions served
  versions continue <runId> [--to VERSION] [--tools-hash H]
                                      re-pin to a served version and resume
  versions cancel <runId>             cancel a run of the version queue
  flow                                flow control: each tenant's line and share, agents, rate limits, changes
  flow tenant <tenant> [--weight W] [--limit N] [--max-waiting N]
                                      a tenant's weight, limit or waiting limit at run time ('default': back
                                      to config)
  flow agent <agent> --limit N        an agent's concurrency limit at run time
  spend [--period YYYY-MM-DD|YYYY-MM] model spend by tenant, agent and model (µ$; default today)

options:
  --url URL      the API (default: $AGENTCTL_URL, else ${DEFAULT_URL})
  --token TOKEN  an operator's bearer token (default: $OPERATOR_TOKEN)
  --timeout MS   how long each request waits for an answer (default: $AGENTCTL_TIMEOUT_MS, else ${DEFAULT_TIMEOUT_MS});
                 a request with no answer is asked ${ATTEMPTS} times in all when repeating it is safe (reads)
  -h, --help     this help

Exit code 0 on a 2xx answer (printed as JSON); 1 on a refusal (its JSON body), an API that cannot be reached or
a credential refused; 2 on a command-line mistake.
Docs: docs/operations.md (the operator's work), docs/client.md (the same calls from code).`;

const OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  timeout: { type: 'string' },
  fingerprint: { type: 'string' },
  /** Named only to be refused (parse below): earlier releases took the approver's name here. */
  as: { type: 'string' },
  receipt: { type: 'string' },
  evidence: { type: 'string' },
  from: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  steps: { type: 'string' },
  tokens: { type: 'string' },
  'wall-ms': { type: 'string' },
  cost: { type: 'string' },
  status: { type: 'string' },
  tenant: { type: 'string' },
  agent: { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  to: { type: 'string' },
  'tools-hash': { type: 'string' },
  weight: { type: 'string' },
  'max-waiting': { type: 'string' },
  period: { type: 'string' },
} as const;

/** A command-line mistake: said in one line, exit 2. */
class UsageError extends Error {}

function parse(argv: string[]) {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options: OPTIONS });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  // The API records a decision under the operator of the token, never a name from the request: a name given here
  // would be dropped while the command succeeded, so it is refused.
  if (parsed.values.as !== undefined)
    throw new UsageError(
      "--as is not accepted: the API records the token's operator; pass that operator's --token (or OPERATOR_TOKEN)",
    );
  return parsed;
}
type Values = ReturnType<typeof parse>['values'];

function need(value: string | undefined, what: string): string {
  if (!value) throw new UsageError(`missing ${what}`);
  return value;
}

/** Ids are checked by format here too: a malformed one never reaches the server. */
function id(x: string | undefined, what: 'runId' | 'actionId'): string {
  const value = need(x, what);
  if (!(what === 'runId' ? isRunId(value) : isActionId(value)))
    throw new UsageError(
      `${what} ${JSON.stringify(value)} is malformed (${what === 'runId' ? 'r_ + 24 hex digits' : 'a_ + 32 hex digits'})`,
    );
  return value;
}

/** --timeout (else AGENTCTL_TIMEOUT_MS): a whole number of milliseconds, at least 1. */
function timeoutMs(option: string | undefined, env: string | undefined): number {
  const [value, what] = option !== undefined ? [option, '--timeout'] : [env, 'AGENTCTL_TIMEOUT_MS'];
  if (value === undefined || value === '') return DEFAULT_TIMEOUT_MS;
  if (!/^\d+$/.test(value) || Number(value) < 1)
    throw new UsageError(`${what} must be a whole number of milliseconds, at least 1`);
  return Number(value);
}

/** A number as typed: the server validates it (400 naming the field), so the rules live in one place. */
const num = (v: string | undefined) => (v === undefined ? undefined : /^\d+$/.test(v) ? Number(v) : v);
/** A flow value ('default' = back to the configured value). */
const flowValue = (v: string | undefined) =>
  v === undefined ? undefined : v === 'default' ? null : Number.isFinite(Number(v)) ? Number(v) : v;

const print = (value: unknown) => console.log(JSON.stringify(value, null, 2));

async function runCommand(fleet: FleetClient, values: Values, positionals: string[]): Promise<void> {
  const [command, a, b] = positionals;
  switch (command) {
    case 'runs':
      return void print(
        await fleet.listRuns({
          ...(values.status !== undefined ? { status: values.status as never } : {}),
          ...(values.tenant !== undefined ? { tenant: values.tenant } : {}),
          ...(values.agent !== undefined ? { agent: values.agent } : {}),
          ...(values.since !== undefined ? { since: values.since } : {}),
          ...(values.until !== undefined ? { until: values.until } : {}),
          ...(values.cursor !== undefined ? { cursor: values.cursor } : {}),
          ...(values.limit !== undefined ? { limit: num(values.limit) as number } : {}),
        }),
      );
    case 'run':
      return void print(await fleet.getRun(id(a, 'runId')));
    case 'events':
      for await (const e of fleet.followEvents(id(a, 'runId'), values.from ? { after: values.from } : {}))
        console.log(`id: ${e.id}  event: ${e.type}  data: ${JSON.stringify(e.data)}`);
      return;
    case 'cancel':
      return void print(await fleet.cancelRun(id(a, 'runId')));
    case 'retry': {
      const ext = {
        steps: num(values.steps),
        tokens: num(values.tokens),
        wallMs: num(values['wall-ms']),
        cost: num(values.cost),
      };
      const body = Object.fromEntries(Object.entries(ext).filter(([, v]) => v !== undefined));
      return void print(await fleet.retryRun(id(a, 'runId'), body));
    }
    case 'approvals':
      return void print(await fleet.listApprovals());
    case 'approve':
    case 'reject': {
      const actionId = id(a, 'actionId');
      const fingerprint = need(values.fingerprint, '--fingerprint');
      return void print(
        await (command === 'approve' ? fleet.approve : fleet.reject).call(fleet, actionId, fingerprint),
      );
    }
    case 'reconciliations':
      return void print(await fleet.listReconciliations());
    case 'resolve': {
      let evidence: unknown = {};
      if (values.evidence) {
        try {
          evidence = JSON.parse(values.evidence) as unknown;
        } catch {
          throw new UsageError('--evidence must be JSON');
        }
      }
      return void print(
        await fleet.resolve(id(a, 'actionId'), {
          finding: need(b, 'finding') as never,
          evidence,
          ...(values.receipt ? { receipt: values.receipt } : {}),
        }),
      );
    }
    case 'versions':
      if (a === undefined || a === 'list')
        return void print(await fleet.versionQueue(values.limit ? { limit: num(values.limit) as number } : {}));
      if (a === 'continue')
        return void print(
          await fleet.continueVersion(id(b, 'runId'), {
            ...(values.to !== undefined ? { agentVersion: values.to } : {}),
            ...(values['tools-hash'] !== undefined ? { toolsHash: values['tools-hash'] } : {}),
          }),
        );
      if (a === 'cancel') return void print(await fleet.cancelVersionParked(id(b, 'runId')));
      throw new UsageError(`unknown versions command ${a}`);
    case 'flow':
      if (a === undefined) return void print(await fleet.flow());
      if (a === 'tenant')
        return void print(
          await fleet.setTenantFlow(need(b, 'tenant'), {
            weight: flowValue(values.weight) as never,
            limit: flowValue(values.limit) as never,
            maxWaiting: flowValue(values['max-waiting']) as never,
          }),
        );
      if (a === 'agent')
        return void print(
          await fleet.setAgentFlow(need(b, 'agent'), { limit: flowValue(need(values.limit, '--limit')) as never }),
        );
      throw new UsageError(`unknown flow command ${a}`);
    case 'spend':
      return void print(await fleet.spend(values.period));
    default:
      throw new UsageError(command === undefined ? 'no command given' : `unknown command ${command}`);
  }
}

/** An expected failure in one line naming the cause and the fix; undefined for a refusal (its body is printed). */
export function failureLine(err: unknown, url: string): string | undefined {
  if (err instanceof Unreachable)
    return err.timeoutMs !== undefined
      ? `${err.message}: the API (or a proxy before it) is not answering: look at its log and /readyz, or raise --timeout / AGENTCTL_TIMEOUT_MS`
      : `${err.message}: start the API (agent-fleet api) or point --url / AGENTCTL_URL at it`;
  if (err instanceof Unauthorized && err.status === 401)
    return err.tokenSent
      ? `the API at ${url} refused the token: pass an operator token it knows (--token or OPERATOR_TOKEN, as the API's OPERATOR_TOKEN / OPERATORS)`
      : `no token given: pass --token or set OPERATOR_TOKEN (the API's OPERATOR_TOKEN, or one of its OPERATORS)`;
  if (err instanceof AuthNotConfigured) return `the API at ${url} is missing a setting: ${err.message}`;
  if (err instanceof StoreUnavailable) return `the API at ${url} answered 503 ${err.code}: ${err.message}`;
  return undefined;
}

export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let url = env.AGENTCTL_URL ?? DEFAULT_URL;
  try {
    const { values, positionals } = parse(argv);
    if (values.help) {
      console.log(HELP);
      return 0;
    }
    url = values.url ?? url;
    const token = values.token ?? env.OPERATOR_TOKEN;
    const requestTimeoutMs = timeoutMs(values.timeout, env.AGENTCTL_TIMEOUT_MS);
    await runCommand(
      new FleetClient({ url, token, requestTimeoutMs, retry: { attempts: ATTEMPTS } }),
      values,
      positionals,
    );
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`agentctl: ${err.message} (agentctl --help lists the commands)`);
      return 2;
    }
    const line = failureLine(err, url);
    if (line !== undefined) {
      console.error(`agentctl: ${line}`);
      return 1;
    }
    if (err instanceof FleetApiError) {
      console.log(JSON.stringify(err.body));
      return 1;
    }
    console.error(`agentctl: ${(err as Error).message}`);
    return 1;
  }
}

refuseUnsupportedNode('agentctl');
process.exitCode = await main(process.argv.slice(2));
