/**
 * Reading a Server-Sent Events response in tests: the wire parsed block by
 * block (`id:`, `event:`, `data:` lines; several data lines joined by a newline;
 * comment blocks skipped), each event handed over in order as it arrives. A
 * `retry:` line sets the client's reconnection delay and names no event: a block
 * of it alone is none, as an EventSource dispatches none.
 */
export interface SseEvent {
  id: string;
  event: string;
  data: string;
}

/** A block's event (undefined when it names none) and the reconnection delay (ms) it sets with `retry:`, if any. */
function parseBlock(block: string): { event: SseEvent | undefined; retry: number | undefined } {
  const ev: SseEvent = { id: '', event: '', data: '' };
  let fields = 0;
  let retry: number | undefined;
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) continue;
    const c = line.indexOf(':');
    const field = c < 0 ? line : line.slice(0, c);
    const value = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
    if (field === 'retry') {
      if (/^\d+$/.test(value)) retry = Number(value);
      continue;
    }
    fields++;
    if (field === 'id') ev.id = value;
    else if (field === 'event') ev.event = value;
    else if (field === 'data') ev.data = ev.data ? `${ev.data}\n${value}` : value;
  }
  return { event: fields === 0 ? undefined : ev, retry };
}

/**
 * One SSE block (`field: value` or `field:value` lines), or undefined for a block naming no event: comments only (a
 * keep-alive), or a `retry:` alone.
 */
export function parseSseBlock(block: string): SseEvent | undefined {
  return parseBlock(block).event;
}

/**
 * Reads `res`'s events into `events` until the server ends the response (`ended: true`) or `stop(events)`
 * says enough (the body is cancelled: `ended: false`).
 */
export async function readSse(
  res: Response,
  stop: (events: SseEvent[]) => boolean = () => false,
): Promise<{ events: SseEvent[]; ended: boolean; retry?: number }> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const events: SseEvent[] = [];
  let buf = '';
  let retry: number | undefined;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return { events, ended: true, retry };
    buf += decoder.decode(value, { stream: true });
    let idx: number;
    while ((idx = buf.indexOf('\n\n')) >= 0) {
      const { event: ev, retry: set } = parseBlock(buf.slice(0, idx));
      retry = set ?? retry;
      buf = buf.slice(idx + 2);
      if (!ev) continue;
      events.push(ev);
      if (stop(events)) {
        await reader.cancel().catch(() => {});
        return { events, ended: false, retry };
      }
    }
  }
}
