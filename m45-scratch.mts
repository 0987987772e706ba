import { writeFileSync } from 'node:fs';
import { connectMcpServer } from './src/mcp/mcpTools.ts';
const env = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined));
const f = '/tmp/m45-down-dbg';
const conn = await connectMcpServer({ command: process.execPath, args: ['--import', 'tsx', 'testkit/mcpHostileServer.ts'], env: { ...env, MCP_HOSTILE_TOOLS: 'pid', MCP_DOWN_FILE: f } }, { reconnect: { baseMs: 50, maxMs: 200 } });
const r: any = await (conn.tools[0] as any).execute({}, { signal: new AbortController().signal });
writeFileSync(f, '');
process.kill(r.pid, 'SIGKILL');
for (let i = 0; i < 40; i++) { await new Promise((res) => setTimeout(res, 500)); console.log(JSON.stringify(conn.status())); }
process.exit(0);
