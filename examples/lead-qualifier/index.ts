/**
 * An example agent on the public API: it qualifies a sales lead (enriches the
 * company, opens a deal in the CRM) and answers with a summary.
 *
 * Run it with the stock processes, unmodified:
 *   AGENTS_MODULE=examples/lead-qualifier/index.ts CRM_URL=http://127.0.0.1:4020 npm run worker
 * and start runs with POST /v1/runs { tenant, agent: 'lead-qualifier', input: { leadId, company, email } }.
 */
import { z } from 'zod';
import {
  defineAgent,
  defineAgentsModule,
  defineReadTool,
  defineWriteTool,
  httpJson,
  OutcomeUnknownError,
  TerminalError,
  type LookupResult,
} from '../../src/index.js';

const leadSchema = z
  .object({
    leadId: z.string().min(1).max(100),
    company: z.string().min(1).max(200),
    email: z.email(),
  })
  .strict();
type Lead = z.infer<typeof leadSchema>;

const dealArgs = z
  .object({
    leadId: z.string().min(1),
    company: z.string().min(1),
    tier: z.enum(['smb', 'enterprise']),
    amountCents: z.number().int().positive(),
  })
  .strict();

export function leadQualifier(crm: { baseUrl: string }) {
  const lookupCompany = defineReadTool({
    name: 'lookup_company',
    description: 'Look a company up in the CRM: size and industry.',
    args: z.object({ company: z.string().min(1) }).strict(),
    timeoutMs: 3000,
    async execute({ company }, ctx) {
      const res = await httpJson(`${crm.baseUrl}/companies/${encodeURIComponent(company)}`, {
        method: 'GET',
        timeoutMs: 3000,
        signal: ctx.signal,
      });
      return res.status === 200 ? res.body : { found: false };
    },
  });

  const createDeal = defineWriteTool({
    name: 'create_deal',
    description: 'Open a deal for a qualified lead in the CRM.',
    args: dealArgs,
    // One deal per lead, whatever the amount the model proposes.
    identity: (a) => ({ leadId: a.leadId }),
    service: { enforcesKey: true, reconcile: 'lookup' },
    async dispatch(args, _ctx, req) {
      const res = await httpJson(`${crm.baseUrl}/deals`, {
        method: 'POST',
        headers: { 'idempotency-key': req.idempotencyKey },
        body: args,
        timeoutMs: req.timeoutMs,
        signal: req.signal,
      });
      const deal = res.body as { id?: unknown } | undefined;
      if ((res.status === 200 || res.status === 201) && typeof deal?.id === 'string') {
        return {
          receipt: deal.id,
          output: { dealId: deal.id },
          replayed: res.headers.get('idempotent-replayed') === 'true',
        };
      }
      if (res.status === 200 || res.status === 201) throw new OutcomeUnknownError('the CRM answered without a deal id');
      throw new TerminalError('invalid_input', `the CRM refused the deal (${res.status})`);
    },
    async lookup(_ctx, req): Promise<LookupResult> {
      const res = await httpJson(`${crm.baseUrl}/deals?idempotency_key=${encodeURIComponent(req.idempotencyKey)}`, {
        method: 'GET',
        timeoutMs: 3000,
        signal: req.signal,
      });
      const body = res.body as { status?: string; deal?: { id?: unknown }; stopped?: boolean } | undefined;
      if (body?.status === 'committed' && typeof body.deal?.id === 'string') {
        return {
          status: 'committed',
          receipt: body.deal.id,
          output: { dealId: body.deal.id },
          evidence: { query: 'idempotency_key', deal: body.deal.id },
        };
      }
      if (body?.status === 'absent' && body.stopped === true)
        return { status: 'absent_stopped', evidence: { query: 'idempotency_key', absent: true } };
      return { status: 'undecidable', evidence: { query: 'idempotency_key', httpStatus: res.status } };
    },
  });

  return defineAgent<Lead>({
    name: 'lead-qualifier',
    version: 'lead-qualifier@1',
    input: leadSchema,
    tools: [lookupCompany, createDeal],
    instructions: () =>
      'You qualify inbound sales leads. Look the company up, open a deal when it fits, then summarise in one line.',
    prompt: (lead) => `Lead ${lead.leadId}: ${lead.company} <${lead.email}>`,
    key: (lead) => lead.leadId,
    // No compensationFor: a deal opened in doubt stays with a person.
    demoScript: (lead) => [
      {
        toolCalls: [{ name: 'lookup_company', args: { company: lead.company } }],
        usage: { promptTokens: 120, completionTokens: 20 },
      },
      {
        toolCalls: [
          {
            name: 'create_deal',
            args: { leadId: lead.leadId, company: lead.company, tier: 'enterprise', amountCents: 5_000_000 },
          },
        ],
        usage: { promptTokens: 180, completionTokens: 30 },
      },
      {
        toolCalls: [],
        final: `Lead ${lead.leadId} qualified: deal opened.`,
        usage: { promptTokens: 220, completionTokens: 15 },
      },
    ],
  });
}

/** AGENTS_MODULE entry: the CRM's address is the module's own setting, validated at boot (CRM_URL). */
export default defineAgentsModule({
  settings: z.object({
    /** The CRM the tools call. */
    CRM_URL: z.url({ error: 'required (the CRM the lead-qualifier calls)' }),
  }),
  agents: ({ settings }) => [leadQualifier({ baseUrl: settings.CRM_URL })],
});
