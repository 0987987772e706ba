/**
 * `npm run scenario -- <eviction|timeout|retry-storm> [--signal=SIGTERM] [--fault=lost_response]`
 *
 * Replays one of the three source stories against real processes: its own
 * redis-server, the sandbox, the API and worker processes, all started here
 * and stopped at the end (also on error or Ctrl-C). Prints the timeline, the
 * expectations checked, and ONE final line of JSON with the counts.
 * Exit 0 when every expectation held, 1 otherwise, 2 on a usage error.
 */
import { SCENARIOS, UsageError } from './scenarios/index.js';
import { liveStacks } from './scenarios/stack.js';

function usage(): string {
  const lines = Object.entries(SCENARIOS).map(
    ([name, d]) => `  ${name.padEnd(12)} ${d.about}${d.options ? `\n  ${''.padEnd(12)} options: ${d.options}` : ''}`,
  );
  return `usage: npm run scenario -- <name> [options]\n${lines.join('\n')}`;
}

const argv = process.argv.slice(2);
const name = argv.find((a) => !a.startsWith('--'));
const args = new Map(
  argv
    .filter((a) => a.startsWith('--'))
    .map((a) => {
      const [k, v] = a.slice(2).split('=');
      return [k!, v ?? 'true'] as const;
    }),
);
if (args.has('help')) {
  console.log(usage());
  process.exit(0);
}
if (!name || !SCENARIOS[name]) {
  console.error(name ? `unknown scenario: ${name}\n${usage()}` : usage());
  process.exit(2);
}
const def = SCENARIOS[name];

let interrupted = false;
process.on('SIGINT', () => {
  if (interrupted) process.exit(130);
  interrupted = true;
  console.error('interrupted: stopping everything the scenario started');
  void Promise.all([...liveStacks].map((s) => s.stop())).finally(() => process.exit(130));
});

try {
  console.error(`scenario ${name}: ${def.about}`);
  const result = await def.run(args, (line) => console.error(`[${name}] ${line}`));
  console.log(`\n== ${name} timeline ==`);
  for (const line of result.timeline) console.log(line);
  console.log(`\n== expectations ==`);
  for (const c of result.checks) console.log(`${c.ok ? 'ok  ' : 'FAIL'}  ${c.what}`);
  console.log(`\n${result.ok ? 'PASS' : 'FAIL'}: ${name}`);
  console.log(JSON.stringify(result.summary));
  process.exit(result.ok ? 0 : 1);
} catch (err) {
  if (err instanceof UsageError) {
    console.error(`${err.message}\n${usage()}`);
    process.exit(2);
  }
  console.error(err);
  await Promise.all([...liveStacks].map((s) => s.stop().catch(() => {})));
  console.log(JSON.stringify({ scenario: name, ok: false, failures: [(err as Error).message] }));
  process.exit(1);
}
