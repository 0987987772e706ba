/**
 * The model call's prompt and what the call may spend, cached per worker: a run's
 * input never changes and its spec object is cached, so a step neither parses the
 * input nor runs the tokenizer again (that was a fifth of a read step's CPU).
 */
import type { Agent } from '../../core/agent.js';
import { encodeEntry, estimateTokens, type JournalEntry } from '../../core/journal.js';
import { estimateCallTokens, isContext, type BudgetStop, type RunUsage } from '../../budget/tenantBudget.js';
import type { RunSpec } from '../../runs/spec.js';
import { followUpTokens } from '../followUp.js';
import type { StepStore } from './store.js';

export interface Prompt {
  instructions: string;
  prompt: string;
  inputTokens: number;
}

/** What a model call may spend: `tokens` (from the byte bound, or exact), and `exact` while it is the bound. */
export interface Estimate {
  tokens: number;
  exact?: (() => Promise<number>) | undefined;
}

export class Prompts {
  private readonly prompts = new WeakMap<RunSpec, Prompt>();
  /** Tokenizer counts of journal entries, when a budget check needs the transcript's exact size. */
  private readonly entryTokens = new WeakMap<JournalEntry, number>();

  /** @param previous a follow-up's previous conversation, once known ('' for none). */
  constructor(
    private readonly store: Pick<StepStore, 'transcript'>,
    private readonly completionCap: number,
    private readonly previous: (spec: RunSpec) => string,
  ) {}

  /**
   * A follow-up's previous conversation (read before the first promptOf of the run's
   * spec) goes before the first message, and its tokens into every estimate of the run.
   */
  promptOf(agent: Agent, spec: RunSpec): Prompt {
    let p = this.prompts.get(spec);
    if (!p) {
      const previous = this.previous(spec);
      const prompt = agent.prompt(spec.input);
      const instructions = agent.instructions(spec.input);
      const inputTokens = agent.estimateInputTokens(spec.input);
      p =
        previous === ''
          ? { instructions, prompt, inputTokens }
          : { instructions, prompt: `${previous}\n\n${prompt}`, inputTokens: inputTokens + followUpTokens(previous) };
      this.prompts.set(spec, p);
    }
    return p;
  }

  /**
   * What the step's model call may spend. From the transcript's byte bound when the run
   * keeps one (free: no tokenizer on the step's path), with `exact` to count it instead;
   * a budget check the bound fails is asked again of the exact count (exactIfRefused), so
   * a run stops exactly where counting every entry would stop it, and the tokenizer runs only then.
   */
  async estimateOf(agent: Agent, spec: RunSpec, used: RunUsage): Promise<Estimate> {
    const withContext = (contextTokens: number) =>
      estimateCallTokens(this.promptOf(agent, spec).inputTokens, contextTokens, this.completionCap, agent.tools.specs);
    const exact = async () => withContext(await this.contextTokens(spec.runId));
    // A run from before the byte count was kept: counted exactly at every step.
    if (used.contextBytes === undefined) return { tokens: await exact() };
    return { tokens: withContext(used.contextBytes), exact };
  }

  /** The transcript's tokens, by the tokenizer: each entry counted once per worker. */
  private async contextTokens(runId: string): Promise<number> {
    const entries = await this.store.transcript(runId);
    let n = 0;
    for (const e of entries) {
      if (!isContext(e.kind)) continue;
      let t = this.entryTokens.get(e);
      if (t === undefined) this.entryTokens.set(e, (t = estimateTokens(encodeEntry(e))));
      n += t;
    }
    return n;
  }
}

/**
 * A budget check (`check(tokens)`: a stop, or undefined) on the estimate; a stop of the
 * byte bound is checked again on the exact count, which then replaces the bound. A check
 * that answers at once is answered at once: no promise unless one of the checks is async
 * or the exact count is read (the pre-flight and the run's budget check of each attempt).
 */
export function exactIfRefused(
  estimate: Estimate,
  check: (tokens: number) => BudgetStop | undefined | Promise<BudgetStop | undefined>,
): BudgetStop | undefined | Promise<BudgetStop | undefined> {
  const stop = check(estimate.tokens);
  return stop instanceof Promise
    ? stop.then((s) => againOnExact(estimate, check, s))
    : againOnExact(estimate, check, stop);
}

/** The first check's stop; a stop of the byte bound is asked again of the exact count. */
function againOnExact(
  estimate: Estimate,
  check: (tokens: number) => BudgetStop | undefined | Promise<BudgetStop | undefined>,
  stop: BudgetStop | undefined,
): BudgetStop | undefined | Promise<BudgetStop | undefined> {
  if (stop === undefined || !estimate.exact || (stop.kind !== 'tokens' && stop.kind !== 'tenant_tokens')) return stop;
  return estimate.exact().then((tokens) => {
    estimate.tokens = tokens;
    estimate.exact = undefined;
    return check(tokens);
  });
}
