/** The step's event payloads: codes and names only, never arguments (they may hold customer text). */
import type { DecisionEntry } from '../../core/journal.js';

/** The `decision` event: what the model chose, by tool name. */
export function decisionEvent(d: DecisionEntry): string {
  return JSON.stringify({ step: d.step, tools: d.toolCalls.map((c) => c.name), final: d.final !== undefined });
}
