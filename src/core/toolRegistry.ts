/**
 * An agent's tools by name, the specs a model is shown, and their schema hash
 * (pinned by every run at creation: a run recovered under other tool schemas
 * goes to a person, never quietly on).
 */
import { z } from 'zod';
import { fingerprint } from './canonical.js';
import type { ToolSpec } from './model.js';
import type { Tool } from './tool.js';

export class ToolRegistry {
  private readonly byName: Map<string, Tool>;
  readonly specs: ToolSpec[];
  /** 16 hex digits over each tool's name, description, JSON schema and effect class, in order. */
  readonly schemaHash: string;

  constructor(readonly tools: readonly Tool[]) {
    this.byName = new Map();
    for (const t of tools) {
      if (this.byName.has(t.name)) throw new TypeError(`two tools are named '${t.name}'`);
      this.byName.set(t.name, t);
    }
    this.specs = tools.map((t) => ({
      name: t.name,
      description: t.description,
      parameters: z.toJSONSchema(t.args, { io: 'input' }) as Record<string, unknown>,
    }));
    const shape = this.specs.map((s, i) => ({ ...s, effect: tools[i]!.effect }));
    this.schemaHash = fingerprint(shape).slice(0, 16);
  }

  get(name: string): Tool | undefined {
    return this.byName.get(name);
  }
}
