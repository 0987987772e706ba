/**
 * The bench's sections, in run order. To add one: write bench/sections/<name>.ts
 * exporting a `Section` (see bench/lib/types.ts) and list it here; it then runs
 * with the others and alone with `npm run bench -- --only=<name>`.
 */
import type { Section } from '../lib/types.js';
import { throughput } from './throughput.js';
import { stepCost } from './stepCost.js';
import { overhead } from './overhead.js';
import { recovery } from './recovery.js';
import { cluster } from './cluster.js';
import { memory } from './memory.js';
import { bytes } from './bytes.js';
import { streaming } from './streaming.js';
import { replication } from './replication.js';
import { waits } from './waits.js';
import { children } from './children.js';
import { neighbour } from './neighbour.js';
import { limits } from './limits.js';
import { priority } from './priority.js';
import { rateLimit } from './rateLimit.js';
import { flowCost } from './flowCost.js';
import { intake } from './intake.js';
import { killToModel } from './killToModel.js';
import { search } from './search.js';
import { archive } from './archive.js';

export const sections: Section[] = [
  throughput,
  stepCost,
  overhead,
  cluster,
  memory,
  bytes,
  recovery,
  killToModel,
  streaming,
  waits,
  children,
  replication,
  neighbour,
  limits,
  priority,
  rateLimit,
  flowCost,
  intake,
  search,
  archive,
];
