/**
 * Every command a Redis server executes, in its order, read from MONITOR on a raw socket: what `redisCost` replays
 * into a server of its own. Only the top-level commands are kept (a script's own calls come back when the script
 * is replayed), and the arguments are the exact bytes sent: MONITOR quotes each argument with sdscatrepr (`\"`,
 * `\\`, `\n`, `\r`, `\t`, `\a`, `\b`, and `\xHH` for any other byte that is not printable ASCII), and `unrepr`
 * undoes exactly that. ioredis's own monitor() unescapes only `\"`, which corrupts scripts' JSON arguments.
 */
import { connect, type Socket } from 'node:net';

export interface TracedCommand {
  /** The client's address as MONITOR names it (`127.0.0.1:53422`). */
  client: string;
  /** Command name and arguments, exact bytes. */
  args: Buffer[];
}

const ESCAPES: Record<string, number> = { n: 10, r: 13, t: 9, a: 7, b: 8, '"': 34, '\\': 92 };

/** One quoted MONITOR argument's body (without its quotes) back to its bytes. */
export function unrepr(body: string): Buffer {
  const out: number[] = [];
  for (let i = 0; i < body.length; i++) {
    const c = body.charCodeAt(i);
    if (c !== 92) {
      out.push(c);
      continue;
    }
    const next = body[i + 1];
    if (next === 'x') {
      out.push(parseInt(body.slice(i + 2, i + 4), 16));
      i += 3;
    } else if (next !== undefined && next in ESCAPES) {
      out.push(ESCAPES[next]!);
      i += 1;
    } else {
      throw new Error(`MONITOR line: unknown escape \\${next ?? ''}`);
    }
  }
  return Buffer.from(out);
}

/**
 * One MONITOR line: `<time> [<db> <client>] "ARG" "ARG" ...`. Returns undefined for a script's own call (`[0 lua]`)
 * unless `scriptCalls` asks for those too (their client is then `lua`).
 */
export function parseMonitorLine(line: string, scriptCalls = false): TracedCommand | undefined {
  const open = line.indexOf('[');
  const close = line.indexOf('] ', open);
  if (open < 0 || close < 0) throw new Error(`MONITOR line without a client: ${line.slice(0, 80)}`);
  const client = line.slice(open + 1, close).split(' ')[1] ?? '';
  if (client === 'lua' && !scriptCalls) return undefined;
  const args: Buffer[] = [];
  let i = close + 2;
  while (i < line.length) {
    if (line[i] !== '"') throw new Error(`MONITOR line: expected a quoted argument at ${i}`);
    let j = i + 1;
    // The argument ends at the first quote not escaped (sdscatrepr escapes every quote and backslash inside).
    while (j < line.length && line[j] !== '"') j += line[j] === '\\' ? 2 : 1;
    args.push(unrepr(line.slice(i + 1, j)));
    i = j + 2;
  }
  return { client, args };
}

export interface MonitorCapture {
  /** Stops the capture; resolves with every command seen, in the server's order. */
  stop(): Promise<TracedCommand[]>;
}

/**
 * Starts MONITOR on its own connection (its own commands are not in the trace: MONITOR shows none of them).
 * `scriptCalls`: keep the commands scripts and functions run as well (client `lua`), each after the script's own line.
 */
export async function captureCommands(
  port: number,
  host = '127.0.0.1',
  { scriptCalls = false }: { scriptCalls?: boolean } = {},
): Promise<MonitorCapture> {
  const socket: Socket = connect(port, host);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const commands: TracedCommand[] = [];
  const end = `monitor-trace-end-${process.pid}-${Date.now()}`;
  let ended: () => void = () => {};
  const endSeen = new Promise<void>((resolve) => (ended = resolve));
  let pending = '';
  let ok = false;
  let monitoring: () => void = () => {};
  const started = new Promise<void>((resolve) => (monitoring = resolve));
  let failure: Error | undefined;
  socket.setEncoding('latin1'); // every byte one char: MONITOR lines are ASCII, \xHH carries the rest
  socket.on('data', (chunk: string) => {
    pending += chunk;
    let nl: number;
    while ((nl = pending.indexOf('\r\n')) >= 0) {
      const reply = pending.slice(0, nl);
      pending = pending.slice(nl + 2);
      if (!ok) {
        if (reply !== '+OK') failure = new Error(`MONITOR refused: ${reply}`);
        ok = true;
        monitoring();
        continue;
      }
      try {
        const cmd = parseMonitorLine(reply.slice(1), scriptCalls);
        if (cmd?.args.length === 2 && cmd.args[1]!.toString('latin1') === end) ended();
        else if (cmd) commands.push(cmd);
      } catch (e) {
        failure ??= e as Error;
      }
    }
  });
  socket.on('error', (e) => {
    failure ??= e;
    ended();
    monitoring();
  });
  socket.write('MONITOR\r\n');
  await started; // commands sent before the server's +OK would be missing from the trace
  if (failure) throw failure;
  return {
    async stop() {
      // MONITOR's lines can lag far behind the server under load: an ECHO sent now marks where the trace ends.
      const marker = connect(port, host);
      marker.on('error', (e) => {
        failure ??= e;
        ended();
      });
      marker.write(`*2\r\n$4\r\nECHO\r\n$${end.length}\r\n${end}\r\n`);
      await endSeen;
      marker.destroy();
      socket.destroy();
      if (failure) throw failure;
      return commands;
    },
  };
}
