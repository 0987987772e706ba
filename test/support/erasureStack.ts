/**
 * The erasure tests' stack: the test's own agents on a worker and the full API (withOwnAgents), the archive on a real
 * PostgreSQL, JSON posted as a producer or an operator posts it, and where a text is still stored (storedHits).
 * Made at module level so that its helpers can be named there; started in beforeAll, closed in afterAll.
 */
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../testkit/embeddedPostgres.js';
import { redisUrl } from '../../testkit/harness.js';
import type { Archiver } from '../../src/archive/archiver.js';
import { archiverFor } from '../../src/server/archiving.js';
import { withOwnAgents, type OwnAgents } from './ownAgents.js';
import { archiveHits, redisHits } from './storedHits.js';

const OPERATOR_TOKEN = 'operator-token-for-erasures';
export const operatorAuth = { authorization: `Bearer ${OPERATOR_TOKEN}` };

export interface ErasureStack {
  /** Starts PostgreSQL, then the harness `name` with `env` (the archive's URL and the operator token added). */
  start(): Promise<OwnAgents & { archiver: Archiver }>;
  close(): Promise<void>;
  post(
    path: string,
    body: unknown,
    headers: Record<string, string>,
  ): Promise<{ status: number; body: Record<string, unknown> }>;
  /** POST /v1/erasures of `subject` (tenant acme), as an operator. */
  erase(subject: string): Promise<{ status: number; body: Record<string, unknown> }>;
  /** Every key of the harness's prefixes (the engine's and BullMQ's) holding `needle`. */
  hitsInRedis(needle: string): Promise<string[]>;
  /** Every text column of the archive holding `needle`. */
  hitsInArchive(needle: string): Promise<string[]>;
}

export function erasureStack(
  name: string,
  agents: Parameters<typeof withOwnAgents>[1],
  env: Record<string, string> = {},
): ErasureStack {
  let pg: EmbeddedPostgres | undefined;
  let own: OwnAgents | undefined;
  const started = () => {
    if (!own) throw new Error(`the erasure stack ${name} is not started`);
    return own;
  };
  const post: ErasureStack['post'] = async (path, body, headers) => {
    const res = await fetch(`${started().url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  return {
    async start() {
      pg = await startEmbeddedPostgres();
      own = await withOwnAgents(name, agents, { ARCHIVE_URL: pg.url, OPERATOR_TOKEN, ...env });
      return { ...own, archiver: archiverFor(own.ctx)! };
    },
    async close() {
      await own?.h.close();
      await pg?.stop();
    },
    post,
    erase: (subject) => post('/v1/erasures', { tenant: 'acme', subject }, operatorAuth),
    hitsInRedis: (needle) => redisHits(redisUrl(), needle, `${started().h.env.KEY_PREFIX}*`),
    hitsInArchive: (needle) => archiveHits(started().ctx.archive!.pool, needle),
  };
}
