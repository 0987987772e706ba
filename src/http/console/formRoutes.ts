/**
 * The console's forms: approve or reject, record a human-queue finding, continue or cancel a version change,
 * cancel, retry. Each goes through the same action as the JSON API (src/http/operators/actions.ts), so the same
 * identity, role, tenant and journal rules hold; a success redirects to the run's page with a notice.
 */
import type { Response, Router } from 'express';
import { z } from 'zod';
import type { Compensations } from '../../ledger/compensation.js';
import type { Ledger } from '../../ledger/ledger.js';
import type { EngineContext } from '../../runs/engineContext.js';
import type { VersionRegistry } from '../../runs/versions.js';
import { param } from '../../producer/fieldErrors.js';
import { decideApproval } from '../../operations/approve.js';
import { cancelRun } from '../../operations/cancel.js';
import { cancelVersionRun, continueVersionRun } from '../../operations/continueVersion.js';
import { resolveHumanItem } from '../../operations/resolve.js';
import { retryStoppedRun } from '../../operations/retry.js';
import { answerOf, type ActionAnswer } from '../operators/answers.js';
import { refuse, whoOf, type Guard } from './access.js';
import { CONSOLE } from './pages.js';

const findingForm = z.object({
  csrf: z.string().optional(),
  finding: z.enum(['confirmed', 'not_sent', 'compensate', 'accept']),
  receipt: z.string().max(200).optional(),
  note: z.string().max(2000).optional(),
});
/** Blank = no extension; anything else must be a whole number (400 naming the field). */
const extra = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()))
  .pipe(
    z
      .string()
      .regex(/^\d{1,16}$/, 'a whole number')
      .transform(Number)
      .optional(),
  );
const retryForm = z.object({ csrf: z.string().optional(), steps: extra, tokens: extra, wallMs: extra, cost: extra });
const versionForm = z.object({
  csrf: z.string().optional(),
  agentVersion: z.string().min(1).max(200),
  toolsHash: z.string().regex(/^[0-9a-f]{16}$/),
});
const decisionForm = z.object({
  csrf: z.string().optional(),
  decision: z.enum(['approve', 'reject']),
  fingerprint: z.string().min(1).max(128),
});

/** A refusal's field as text: a string as it is, anything else as JSON. */
const textOf = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));
const fieldsText = (fields: readonly { path: PropertyKey[] | string; message: string }[]) =>
  fields
    .map((x) => `${Array.isArray(x.path) ? x.path.map(String).join('.') : String(x.path)}: ${x.message}`)
    .join(', ');

/** After a form: back to the run page with what happened, or the refusal as a page. */
function answer(res: Response, runId: string, a: ActionAnswer, done: string): void {
  if (a.status >= 200 && a.status < 300)
    return res.redirect(303, `${CONSOLE}/runs/${encodeURIComponent(runId)}?done=${encodeURIComponent(done)}`);
  const message = a.body.message ? `: ${textOf(a.body.message)}` : '';
  refuse(res, a.status, `${textOf(a.body.error ?? 'refused')}${message}`);
}

/** Only the operator role acts; a viewer gets a 403 page saying so. */
function mayAct(res: Response): boolean {
  const { operator } = whoOf(res);
  if (operator.role === 'operator') return true;
  refuse(res, 403, `operator ${operator.name} has the viewer role: it may look, not act`);
  return false;
}

/** The retry form's extension with the blank fields left out. */
function extensionOf({ steps, tokens, wallMs, cost }: z.infer<typeof retryForm>) {
  return {
    ...(cost !== undefined ? { cost } : {}),
    ...(steps !== undefined ? { steps } : {}),
    ...(tokens !== undefined ? { tokens } : {}),
    ...(wallMs !== undefined ? { wallMs } : {}),
  };
}

export interface FormDeps {
  ctx: EngineContext;
  ledger: Ledger;
  compensations: Compensations;
  versions: VersionRegistry;
}

export function mountForms(r: Router, d: FormDeps, guard: Guard): void {
  const { ctx, ledger } = d;
  r.post(`${CONSOLE}/runs/:id/approvals/:actionId`, guard('form'), async (req, res) => {
    if (!mayAct(res)) return;
    const f = decisionForm.safeParse(req.body);
    if (!f.success) return void refuse(res, 400, 'decision and fingerprint are required');
    const { decision, fingerprint } = f.data;
    const actionId = param(req.params.actionId);
    const a = answerOf(await decideApproval(ctx, ledger, whoOf(res).operator, actionId, decision, fingerprint));
    answer(res, param(req.params.id), a, decision === 'approve' ? 'approved' : 'rejected');
  });

  r.post(`${CONSOLE}/runs/:id/reconciliations/:actionId`, guard('form'), async (req, res) => {
    if (!mayAct(res)) return;
    const f = findingForm.safeParse(req.body);
    if (!f.success) return void refuse(res, 400, 'choose a finding');
    const receipt = f.data.receipt?.trim() || undefined;
    if (f.data.finding === 'confirmed' && !receipt)
      return void refuse(res, 400, "a confirmed finding needs the service's id");
    const evidence = { note: f.data.note ?? '', via: 'console' as const };
    const actionId = param(req.params.actionId);
    const operator = whoOf(res).operator;
    const a = answerOf(
      await resolveHumanItem(ctx, ledger, d.compensations, operator, actionId, {
        finding: f.data.finding,
        // An accept takes no receipt (the effect stands as the ledger holds it): a stray one is not recorded.
        receipt: f.data.finding === 'accept' ? undefined : receipt,
        evidence,
      }),
    );
    answer(res, param(req.params.id), a, `finding recorded: ${f.data.finding}`);
  });

  r.post(`${CONSOLE}/runs/:id/version/continue`, guard('form'), async (req, res) => {
    if (!mayAct(res)) return;
    const f = versionForm.safeParse(req.body);
    if (!f.success) return void refuse(res, 400, 'agentVersion and toolsHash are required');
    const runId = param(req.params.id);
    const target = { agentVersion: f.data.agentVersion, toolsHash: f.data.toolsHash };
    const a = answerOf(await continueVersionRun(ctx, ledger, d.versions, whoOf(res).operator, runId, target));
    answer(res, runId, a, `continued under ${f.data.agentVersion}`);
  });

  r.post(`${CONSOLE}/runs/:id/version/cancel`, guard('form'), async (req, res) => {
    if (!mayAct(res)) return;
    const runId = param(req.params.id);
    answer(res, runId, answerOf(await cancelVersionRun(ctx, whoOf(res).operator, runId)), 'cancelled');
  });

  r.post(`${CONSOLE}/runs/:id/cancel`, guard('form'), async (req, res) => {
    if (!mayAct(res)) return;
    const runId = param(req.params.id);
    answer(res, runId, answerOf(await cancelRun(ctx, whoOf(res).operator, runId)), 'cancel requested');
  });

  r.post(`${CONSOLE}/runs/:id/retry`, guard('form'), async (req, res) => {
    if (!mayAct(res)) return;
    const f = retryForm.safeParse(req.body);
    if (!f.success) return void refuse(res, 400, `invalid extension: ${fieldsText(f.error.issues)}`);
    const runId = param(req.params.id);
    const a = answerOf(await retryStoppedRun(ctx, whoOf(res).operator, runId, extensionOf(f.data)));
    if (a.status === 400) {
      const fields = (a.body.fields as { path: string; message: string }[] | undefined) ?? [];
      return void refuse(res, 400, `invalid extension: ${fieldsText(fields)}`);
    }
    answer(res, runId, a, 'retried');
  });
}
