import type { AppContext } from '../app/context.js';
import type { EffectRunner } from '../worker/effects.js';

export function createEffectRunner(_ctx: AppContext): EffectRunner | undefined {
  return undefined;
}
