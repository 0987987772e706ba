/**
 * The order files start in. Vitest starts the files it has timed longest first, and on a checkout it has never
 * timed (CI's clean clone) the largest first. File size says little here: the longest files are short e2e files that
 * drive whole fleets (a failover campaign is 56 lines and 90 s), so a clean clone started them last and the suite
 * waited on one of them alone at its end. Tiers go first by what their files do (processes, then Redis, then pure
 * code); within a tier vitest's own order stands.
 */
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const tierOrder = ['e2e', 'deploy', 'integration', 'unit'];

function tier(spec: TestSpecification): number {
  const at = tierOrder.findIndex((t) => spec.moduleId.includes(`/test/${t}/`));
  return at < 0 ? tierOrder.length : at;
}

export default class TierSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    // Array sort is stable: within a tier, vitest's order stands.
    return (await super.sort(files)).sort((a, b) => tier(a) - tier(b));
  }
}
