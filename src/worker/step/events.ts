/** The step's event payloads: codes and names only, never arguments (they may hold customer text). */
import type { DecisionEntry, ObservationEntry } from '../../core/journal.js';

/** The `decision` event: what the model chose, by tool name. */
export function decisionEvent(d: DecisionEntry): string {
  return JSON.stringify({ step: d.step, tools: d.toolCalls.map((c) => c.name), final: d.final !== undefined });
}

/** The `observation` event of a call journalled on its own (a step of several calls): its tool and status. */
export function observationEvent(o: ObservationEntry): string {
  return JSON.stringify({ step: o.step, callId: o.callId, tool: o.tool, status: o.status });
}
