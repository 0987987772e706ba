/**
 * Run with `node --expose-gc --import tsx`: calls a service that never answers
 * through the production request path (argv[3]: `tool` = httpJson, `model` =
 * the OpenAI provider) with a 1 s timeout while forcing a GC every 20 ms, and
 * prints one JSON line: whether the call failed and after how long. Gives up
 * (fired: false) after 8 s.
 */
import { httpJson } from '../../src/core/httpJson.js';
import { OpenAIProvider } from '../../src/models/openai.js';

const [url, mode] = process.argv.slice(2) as [string, string];
const TIMEOUT_MS = 1000;
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc');
const started = Date.now();
const collector = setInterval(gc, 20);
const giveUp = setTimeout(() => {
  console.log(JSON.stringify({ fired: false, elapsedMs: Date.now() - started }));
  process.exit(0);
}, 8000);

async function call(): Promise<unknown> {
  const signal = new AbortController().signal;
  if (mode === 'tool') return httpJson(url, { method: 'GET', timeoutMs: TIMEOUT_MS, signal });
  const provider = new OpenAIProvider({ baseUrl: url, model: 'm', timeoutMs: TIMEOUT_MS });
  return provider.complete({
    runId: 'r',
    step: 1,
    attempt: 1,
    tools: [],
    maxCompletionTokens: 10,
    signal,
    instructions: 'You are a test.',
    prompt: 'Ticket T: s',
  });
}

try {
  await call();
  console.log(JSON.stringify({ fired: false, answered: true }));
} catch (err) {
  console.log(
    JSON.stringify({
      fired: true,
      elapsedMs: Date.now() - started,
      error: (err as Error).name,
      message: (err as Error).message,
    }),
  );
}
clearInterval(collector);
clearTimeout(giveUp);
