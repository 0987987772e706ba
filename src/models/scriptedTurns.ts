/** The scripted provider's script format (also accepted in POST /v1/runs under agent.script). */
import { z } from 'zod';
import { SCRIPT_USAGE_MAX_TOKENS } from '../core/limits.js';

/** A turn's reported usage, bounded (the script comes in through the API). */
const tokens = z.number().int().nonnegative().max(SCRIPT_USAGE_MAX_TOKENS);
const usageSchema = z.object({ promptTokens: tokens, completionTokens: tokens });

export const scriptTurnSchema = z
  .object({
    toolCalls: z
      .array(z.object({ name: z.string().min(1), args: z.record(z.string(), z.unknown()).default({}) }).strict())
      .default([]),
    final: z.string().optional(),
    /** Omit to make the provider answer without usage (a test of the missing-usage error). */
    usage: usageSchema.strict().optional(),
    /** The first N attempts of this turn fail with a transient 503 (retried in code). */
    transientFailures: z.number().int().min(0).max(20).default(0),
    /** Usage billed for each failed attempt (charged to the run too). */
    failureUsage: usageSchema.strict().optional(),
  })
  .strict();

/** A script's length, 1 to this many turns. */
export const SCRIPT_MAX_TURNS = 1000;

export const scriptSchema = z.array(scriptTurnSchema).min(1).max(SCRIPT_MAX_TURNS);
export type ScriptTurn = z.infer<typeof scriptTurnSchema>;
export type Script = z.infer<typeof scriptSchema>;
