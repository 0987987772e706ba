/**
 * `npm run chaos -- --runs=500 --seconds=90 --seed=1 --workers=3 [--unsafe] [--chaos-every=1] [--crash-p=0.5] [--sigterm-p=0.3] [--restarts=3]`
 * Exit 0 when every invariant holds (or, with --unsafe, when duplicates were detected).
 */
import { runCampaign, formatResult } from './chaos/campaign.js';

const args = new Map(
  process.argv.slice(2).map((a) => {
    const [k, v] = a.replace(/^--/, '').split('=');
    return [k!, v ?? 'true'] as const;
  }),
);
const num = (k: string, d: number) => (args.has(k) ? Number(args.get(k)) : d);

const result = await runCampaign({
  runs: num('runs', 500),
  seconds: num('seconds', 90),
  seed: num('seed', 1),
  workers: num('workers', 3),
  unsafe: args.get('unsafe') === 'true',
  chaosEverySec: num('chaos-every', 1),
  crashPointProbability: num('crash-p', 0.5),
  sigtermProbability: num('sigterm-p', 0.3),
  redisRestarts: num('restarts', 3),
  drainSeconds: num('drain', 90),
  log: (m) => console.error(`[chaos] ${m}`),
});
console.log(formatResult(result));
const show = (label: string, xs: { runId: string; problem: string }[]) => {
  if (xs.length)
    console.log(
      `${label}:\n  ${xs
        .slice(0, 20)
        .map((x) => `${x.runId}: ${x.problem}`)
        .join('\n  ')}`,
    );
};
show('lost runs', result.lostRuns);
show('unresolved unknowns', result.unknowns.unresolved);
show('budget breaches', result.budgetBreaches);
show('journal problems', result.journalProblems);
if (result.duplicateKeys.length)
  console.log(`duplicate keys (first 10): ${result.duplicateKeys.slice(0, 10).join(', ')}`);
if (result.failures.length) console.log(`process failures:\n  ${result.failures.slice(0, 10).join('\n  ')}`);
console.log(JSON.stringify({ ...result, duplicateKeys: result.duplicateKeys.slice(0, 20) }));
process.exit(result.ok ? 0 : 1);
