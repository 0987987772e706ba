/**
 * The connections the agents' tools hold (MCP servers, src/core/toolSource.ts), seen from the process: a gauge per
 * source (up or down, reconnects, tools refused at the listing), a log line per refused tool at boot, and the
 * liveness verdict. A source this process started (a stdio server) that stays down past TOOL_SOURCE_DOWN_MS fails
 * /healthz, so the orchestrator restarts the process and with it the server; a remote one (HTTP) is reported (in
 * the body, the metrics and the alert) but does not fail liveness: restarting this process would not bring it back.
 */
import type { Logger } from 'pino';
import { Gauge, type Registry } from 'prom-client';
import type { AgentCatalog } from '../core/agent.js';
import type { ToolSource, ToolSourceStatus } from '../core/toolSource.js';

/** How long a process-owned source may stay down before liveness fails. */
export const TOOL_SOURCE_DOWN_MS = 60_000;

/** Every distinct source of the catalog's tools. */
export function toolSourcesOf(agents: AgentCatalog): ToolSource[] {
  const sources = new Set<ToolSource>();
  for (const name of agents.names)
    for (const t of agents.get(name)?.tools.tools ?? []) if (t.source) sources.add(t.source);
  return [...sources];
}

/** The sources' gauges on the registry, read at each scrape; the tools refused at the listing logged once. */
export function reportToolSources(sources: readonly ToolSource[], registry: Registry, log: Logger): void {
  for (const s of sources) {
    const st = s.status();
    for (const r of st.refused)
      log.error({ code: 'mcp_schema_refused', source: st.name, tool: r.tool, reason: r.reason }, 'tool schema refused');
  }
  const each = (fn: (st: ToolSourceStatus) => void) => sources.forEach((s) => fn(s.status()));
  new Gauge({
    name: 'agent_tool_source_up',
    help: 'A connection the agents tools hold (an MCP server): 1 up, 0 down',
    labelNames: ['source'],
    registers: [registry],
    collect() {
      each((st) => this.set({ source: st.name }, st.up ? 1 : 0));
    },
  });
  new Gauge({
    name: 'agent_tool_source_reconnects',
    help: 'Connections to a tool source re-established (ok) or attempts that failed (failed), since the process started',
    labelNames: ['source', 'outcome'],
    registers: [registry],
    collect() {
      each((st) => {
        this.set({ source: st.name, outcome: 'ok' }, st.reconnects);
        this.set({ source: st.name, outcome: 'failed' }, st.reconnectFailures);
      });
    },
  });
  new Gauge({
    name: 'agent_tool_schemas_refused',
    help: 'Tools a source listed whose schema was out of bounds (not given to the agent), by reason',
    labelNames: ['source', 'reason'],
    registers: [registry],
    collect() {
      this.reset();
      each((st) => st.refused.forEach((r) => this.inc({ source: st.name, reason: r.reason })));
    },
  });
}

/** What /healthz says of the sources: those down (named), and whether one this process owns is down too long. */
export function toolSourcesHealth(
  sources: readonly ToolSource[],
  now = Date.now(),
  downMs = TOOL_SOURCE_DOWN_MS,
): { alive: boolean; down: string[] } {
  const down = sources.map((s) => s.status()).filter((st) => !st.up);
  const alive = !down.some((st) => st.ownsProcess && now - (st.downSince ?? now) >= downMs);
  return { alive, down: down.map((st) => st.name) };
}
