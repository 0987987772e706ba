/**
 * A tiny CRM for the lead-qualifier example (started by its test and by you,
 * `npx tsx examples/lead-qualifier/crm.ts`): companies to read, deals to
 * create. Creating a deal requires an Idempotency-Key: the same key with the
 * same body answers the original deal (`Idempotent-Replayed: true`) and
 * creates nothing; with another body it is a 409. A deal can be looked up by
 * its key, which is how the fleet settles a lost answer.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Deal {
  id: string;
  leadId: string;
  company: string;
  tier: string;
  amountCents: number;
}

export interface CrmHandle {
  url: string;
  /** Deals created (business effects): a duplicate would be a second deal for one lead. */
  deals(): Deal[];
  /** Deals created per Idempotency-Key (what a crash test counts against its runs). */
  effectsByKey(): Record<string, number>;
  close(): Promise<void>;
}

const COMPANIES: Record<string, { employees: number; industry: string }> = {
  'acme corp': { employees: 1200, industry: 'manufacturing' },
  'tiny shop': { employees: 4, industry: 'retail' },
};

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString() || 'null');
}

export async function startCrm(port = 0): Promise<CrmHandle> {
  const byKey = new Map<string, { deal: Deal; bodyHash: string }>();
  const deals: Deal[] = [];
  const createdPerKey: Record<string, number> = {};
  const server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://crm');
      const company = /^\/companies\/([^/]+)$/.exec(url.pathname);
      if (req.method === 'GET' && company) {
        const name = decodeURIComponent(company[1]!);
        const found = COMPANIES[name.toLowerCase()];
        return found ? void send(res, 200, { name, ...found }) : void send(res, 404, { error: 'unknown_company' });
      }
      if (req.method === 'POST' && url.pathname === '/deals') {
        const key = req.headers['idempotency-key'];
        if (typeof key !== 'string' || key.length === 0)
          return void send(res, 400, { error: 'idempotency_key_required' });
        const body = (await readJson(req)) as Omit<Deal, 'id'>;
        const bodyHash = createHash('sha256').update(JSON.stringify(body)).digest('hex');
        const seen = byKey.get(key);
        if (seen) {
          if (seen.bodyHash !== bodyHash) return void send(res, 409, { error: 'key_reused_with_another_body' });
          return void send(res, 200, seen.deal, { 'idempotent-replayed': 'true' });
        }
        const deal: Deal = {
          id: `deal_${deals.length + 1}`,
          leadId: body.leadId,
          company: body.company,
          tier: body.tier,
          amountCents: body.amountCents,
        };
        deals.push(deal);
        createdPerKey[key] = (createdPerKey[key] ?? 0) + 1;
        byKey.set(key, { deal, bodyHash });
        return void send(res, 201, deal);
      }
      if (req.method === 'GET' && url.pathname === '/deals') {
        const key = url.searchParams.get('idempotency_key') ?? '';
        const seen = byKey.get(key);
        // Requests are committed before they are answered and never queued: absent means never received, and stopped.
        return void send(
          res,
          200,
          seen ? { status: 'committed', deal: seen.deal } : { status: 'absent', stopped: true },
        );
      }
      send(res, 404, { error: 'not_found' });
    })().catch(() => send(res, 400, { error: 'bad_request' }));
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    deals: () => [...deals],
    effectsByKey: () => ({ ...createdPerKey }),
    close: () => new Promise((r) => server.close(() => r())),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const crm = await startCrm(Number(process.env.CRM_PORT ?? 4020));
  console.log(`crm listening on ${crm.url}`);
}
