/** A pino destination that keeps every line a test's logger writes, as text and parsed. */
import { Writable } from 'node:stream';

export interface CapturedLines {
  stream: Writable;
  text: () => string;
  lines: () => Record<string, unknown>[];
}

export function captureLines(): CapturedLines {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(String(chunk));
      cb();
    },
  });
  const text = () => chunks.join('');
  return {
    stream,
    text,
    lines: () =>
      text()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}
