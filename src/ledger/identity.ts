/**
 * Action identity: derived from the run and the business action (tool name +
 * the canonical identifying arguments, RFC 8785 + sha256), never from the
 * attempt, the worker or the clock. The same write requested twice in one run
 * is the same action, with the same idempotency key and request id.
 * Decision record 0006: docs/decisions/0006-action-identity-comes-from-the-run-and-the-busines.md.
 */
import { canonicalJson, fingerprint, sha256Hex } from '../core/canonical.js';
import type { WriteTool } from '../core/tool.js';

export interface ActionIdentity {
  actionId: string;
  idempotencyKey: string;
  requestId: string;
  /** sha256 of the canonical material fields: what an approval binds to. */
  fingerprint: string;
}

export function actionIdentity(runId: string, tool: WriteTool, args: unknown): ActionIdentity {
  const identity = tool.identity ? tool.identity(args) : args;
  const digest = sha256Hex(canonicalJson({ runId, tool: tool.name, identity }));
  return {
    actionId: `a_${digest.slice(0, 32)}`,
    idempotencyKey: `${runId}:${tool.name}:${digest.slice(0, 24)}`,
    requestId: `rq_${digest.slice(32, 56)}`,
    fingerprint: fingerprint(tool.material ? tool.material(args) : args),
  };
}

/**
 * The identity of the action that compensates `originalActionId`: derived from the original's action id alone, so a
 * second request to compensate it (a repeated operator POST) names the same action, key and request id.
 */
export function compensationIdentity(runId: string, originalActionId: string, args: unknown): ActionIdentity {
  const digest = sha256Hex(canonicalJson({ compensates: originalActionId }));
  return {
    actionId: `a_${digest.slice(0, 32)}`,
    idempotencyKey: `${runId}:compensate:${digest.slice(0, 24)}`,
    requestId: `rq_${digest.slice(32, 56)}`,
    fingerprint: fingerprint(args),
  };
}
