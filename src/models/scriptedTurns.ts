/** The scripted provider's script format (also accepted in POST /v1/runs under agent.script). */
import { z } from 'zod';
import { SCRIPT_USAGE_MAX_TOKENS } from '../core/limits.js';

/** A turn's reported usage, bounded (the script comes in through the API). */
const tokens = z.number().int().nonnegative().max(SCRIPT_USAGE_MAX_TOKENS);
const tokenUsageSchema = z.object({ promptTokens: tokens, completionTokens: tokens });

const turnFields = {
  toolCalls: z
    .array(z.object({ name: z.string().min(1), args: z.record(z.string(), z.unknown()).default({}) }).strict())
    .default([]),
  final: z.string().optional(),
  /** Omit to make the provider answer without usage (a test of the missing-usage error). */
  usage: tokenUsageSchema.strict().optional(),
  /** The first N attempts of this turn fail with a transient 503 (retried in code). */
  transientFailures: z.number().int().min(0).max(20).default(0),
  /** Usage billed for each failed attempt (charged to the run too). */
  failureUsage: tokenUsageSchema.strict().optional(),
};

export const scriptTurnSchema = z.object(turnFields).strict();

/** Bounds of a branching turn: its branches, and the text a condition looks for. */
export const SCRIPT_MAX_BRANCHES = 10;
export const SCRIPT_CONTAINS_MAX_CHARS = 200;

/**
 * One branch of a branching turn: a turn played when its condition holds. `whenLastToolResult.contains`
 * holds when the JSON of a tool result of the run's last step that has any (an observation's `status` and
 * `output`, e.g. `{"status":"ok","output":{"answer":"..."}}`) contains the text; no condition always holds.
 */
export const scriptBranchSchema = z
  .object({
    ...turnFields,
    whenLastToolResult: z
      .object({ contains: z.string().min(1).max(SCRIPT_CONTAINS_MAX_CHARS) })
      .strict()
      .optional(),
  })
  .strict();

/**
 * A turn that depends on what the run's tools answered: the first branch whose condition holds is played (none
 * holding fails the step `invalid_input`). It lets a deterministic script show an agent that reads a result and
 * acts on it (another agent's answer, a lookup that found nothing) without a real model.
 */
export const scriptBranchingTurnSchema = z
  .object({ branches: z.array(scriptBranchSchema).min(1).max(SCRIPT_MAX_BRANCHES) })
  .strict();

/** Whether a script's entry is a branching turn (it names `branches`): the scripted provider validates it as one. */
export function isBranchingTurn(raw: unknown): boolean {
  return typeof raw === 'object' && raw !== null && !Array.isArray(raw) && 'branches' in raw;
}

/** Either form, as the API's document describes an entry (JSON Schema, the request's side). */
const entryDocument = (() => {
  const { $schema: _, ...schema } = z.toJSONSchema(z.union([scriptTurnSchema, scriptBranchingTurnSchema]), {
    io: 'input',
  });
  return schema;
})();

/**
 * What a script holds at a step: a turn, or a branching turn. Chosen by the `branches` field, then validated by that
 * form alone, so an issue names the field that is wrong (a union names only the entry); the API's document shows
 * both forms.
 */
export const scriptEntrySchema = z
  .unknown()
  .transform((raw, ctx): ScriptTurn | ScriptBranchingTurn => {
    const r = isBranchingTurn(raw) ? scriptBranchingTurnSchema.safeParse(raw) : scriptTurnSchema.safeParse(raw);
    if (r.success) return r.data;
    for (const issue of r.error.issues) ctx.addIssue({ ...issue });
    return z.NEVER;
  })
  .meta({
    override: (ctx) => {
      Object.assign(ctx.jsonSchema, entryDocument);
    },
  });

/** A script's length, 1 to this many turns. */
export const SCRIPT_MAX_TURNS = 1000;

export const scriptSchema = z.array(scriptEntrySchema).min(1).max(SCRIPT_MAX_TURNS);
export type ScriptTurn = z.infer<typeof scriptTurnSchema>;
export type ScriptBranch = z.infer<typeof scriptBranchSchema>;
export type ScriptBranchingTurn = z.infer<typeof scriptBranchingTurnSchema>;
export type ScriptEntry = ScriptTurn | ScriptBranchingTurn;
export type Script = z.infer<typeof scriptSchema>;
