/**
 * The operator console at /console: runs listed and filtered, a run's page
 * (input, conversation, effects with their ledger history, budget, live
 * updates over the run's event stream), and forms to approve or reject, to
 * resolve a human-queue item, to cancel and to retry a stopped run; all through the same actions as
 * the JSON API (src/http/operators/actions.ts), so the same identity,
 * role, tenant and journal rules hold.
 *
 * Login: the operator's token or JWT in a form -> a session cookie
 * (session.ts), or a bearer header on every request. Forms carry the
 * session's CSRF token; a bearer request needs none (a browser never adds
 * one by itself). Every response sets a strict Content-Security-Policy (no
 * inline script or style), no-store and nosniff.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { Router, type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';
import type { EngineContext } from '../../runs/engineContext.js';
import type { Compensations } from '../../ledger/compensation.js';
import type { Ledger } from '../../ledger/ledger.js';
import { isRunId } from '../../store/keys.js';
import { bearer, operatorSeesRun } from '../auth.js';
import { directoryFor, type Operator } from '../operatorIdentity.js';
import { runView } from '../runView.js';
import {
  cancelRun,
  decideApproval,
  resolveHumanItem,
  retryStoppedRun,
  type ActionAnswer,
} from '../operators/actions.js';
import { runJobs } from './jobs.js';
import { cancelVersionRun, continueVersionRun } from '../operators/versions.js';
import { isVersionParked } from '../../runs/versionQueue.js';
import { VersionRegistry, versionLabel } from '../../runs/versions.js';
import { pendingApprovals } from '../operators/approvals.js';
import { humanQueue } from '../operators/reconciliations.js';
import { BadCursor, runListQuerySchema, runsPage as listPage } from '../operators/runsList.js';
import { param } from '../../producer/fieldErrors.js';
import {
  CONSOLE,
  errorPage,
  loginPage,
  runLive,
  runPage,
  runsPage,
  type HumanItem,
  type RunPageData,
} from './pages.js';
import { flowPage } from './flowPage.js';
import { flowViewFor } from '../operators/flow.js';
import { ConsoleSessions, cookieFlags, cookies, LOGIN_CSRF_COOKIE, sameToken } from './session.js';

export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
/** Static files, read once: htmx from its npm package (exact version in package.json), ours from ./static. */
function staticFiles(): Map<string, { type: string; body: Buffer }> {
  return new Map([
    ['htmx.min.js', { type: 'text/javascript', body: readFileSync(require.resolve('htmx.org/dist/htmx.min.js')) }],
    ['console.js', { type: 'text/javascript', body: readFileSync(join(here, 'static', 'console.js')) }],
    ['console.css', { type: 'text/css', body: readFileSync(join(here, 'static', 'console.css')) }],
  ]);
}

interface Who {
  operator: Operator;
  csrf?: string;
  viaBearer: boolean;
}

const findingForm = z.object({
  csrf: z.string().optional(),
  finding: z.enum(['confirmed', 'not_sent', 'compensate']),
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
const retryForm = z.object({ csrf: z.string().optional(), steps: extra, tokens: extra, wallMs: extra });
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

export function consoleRouter(
  ctx: EngineContext,
  ledger: Ledger,
  sessions: ConsoleSessions,
  compensations: Compensations,
): Router {
  const r = Router();
  const files = staticFiles();
  const dir = directoryFor(ctx.cfg);
  const versions = new VersionRegistry(ctx.redis, ctx.keys, ctx.cfg.VERSION_TTL_MS);

  r.use(CONSOLE, (_req, res, next) => {
    res.setHeader('content-security-policy', CONSOLE_CSP);
    res.setHeader('x-content-type-options', 'nosniff');
    res.setHeader('referrer-policy', 'no-referrer');
    res.setHeader('cache-control', 'no-store');
    next();
  });
  r.use(CONSOLE, express.urlencoded({ extended: false, limit: '16kb' }));

  r.get(`${CONSOLE}/static/:file`, (req, res) => {
    const f = files.get(param(req.params.file));
    if (!f) return void res.status(404).type('text/plain').send('not found');
    res.setHeader('cache-control', 'public, max-age=3600');
    res.type(f.type).send(f.body);
  });

  const html = (res: Response, status: number, body: string) => void res.status(status).type('html').send(body);

  /** Who is asking: a bearer credential, else the session; undefined = not logged in. */
  async function who(req: Request): Promise<Who | undefined> {
    const token = bearer(req);
    if (token !== undefined) {
      const operator = await dir.authenticate(token);
      return operator ? { operator, viaBearer: true } : undefined;
    }
    const s = await sessions.read(req);
    return s ? { operator: s.operator, csrf: s.csrf, viaBearer: false } : undefined;
  }

  /** Pages: not logged in -> the login page (303). Forms (POST) also need the session's CSRF token. */
  const guard = (kind: 'page' | 'form') => async (req: Request, res: Response, next: NextFunction) => {
    if (!dir.configured)
      return html(
        res,
        503,
        errorPage(503, 'the console is disabled until OPERATOR_TOKEN, OPERATORS or OIDC_ISSUER is configured'),
      );
    const w = await who(req);
    if (!w) {
      if (kind === 'page' && bearer(req) === undefined) return void res.redirect(303, `${CONSOLE}/login`);
      return html(res, 401, errorPage(401, 'log in first'));
    }
    if (kind === 'form' && !w.viaBearer && !sameToken((req.body as { csrf?: string } | undefined)?.csrf, w.csrf)) {
      return html(
        res,
        403,
        errorPage(
          403,
          'this form is stale or was not sent from the console (CSRF token mismatch): reload the page',
          w.operator,
          w.csrf,
        ),
      );
    }
    res.locals.who = w;
    next();
  };
  const whoOf = (res: Response) => res.locals.who as Who;

  r.get(CONSOLE, (_req, res) => void res.redirect(303, `${CONSOLE}/runs`));

  r.get(`${CONSOLE}/login`, (req, res) => {
    const csrf = randomBytes(24).toString('base64url');
    res.append('set-cookie', `${LOGIN_CSRF_COOKIE}=${csrf}; ${cookieFlags(req, 600_000)}`);
    html(res, 200, loginPage(csrf));
  });

  r.post(`${CONSOLE}/login`, async (req, res) => {
    const body = (req.body ?? {}) as { token?: unknown; csrf?: unknown };
    const fresh = () => {
      const csrf = randomBytes(24).toString('base64url');
      res.append('set-cookie', `${LOGIN_CSRF_COOKIE}=${csrf}; ${cookieFlags(req, 600_000)}`);
      return csrf;
    };
    if (!sessions.enabled)
      return html(
        res,
        503,
        errorPage(
          503,
          'console login is disabled until CONSOLE_SESSION_SECRET is configured (production); a bearer header still works',
        ),
      );
    if (typeof body.csrf !== 'string' || !sameToken(body.csrf, cookies(req)[LOGIN_CSRF_COOKIE]))
      return html(res, 403, loginPage(fresh(), 'the login form expired: try again'));
    const operator =
      typeof body.token === 'string' && body.token.length <= 8192 ? await dir.authenticate(body.token) : undefined;
    if (!operator) return html(res, 401, loginPage(fresh(), 'that token is not valid'));
    await sessions.create(req, res, operator, body.token as string);
    res.append('set-cookie', `${LOGIN_CSRF_COOKIE}=; ${cookieFlags(req, 0)}`);
    ctx.log.info(
      { code: 'console_login', operator: operator.name, role: operator.role },
      'operator logged in to the console',
    );
    res.redirect(303, `${CONSOLE}/runs`);
  });

  r.post(`${CONSOLE}/logout`, guard('form'), async (req, res) => {
    await sessions.destroy(req, res);
    res.redirect(303, `${CONSOLE}/login`);
  });

  r.get(`${CONSOLE}/runs`, guard('page'), async (req, res) => {
    const w = whoOf(res);
    // Empty form fields mean "any".
    const query = Object.fromEntries(Object.entries(req.query).filter(([, v]) => v !== ''));
    const parsed = runListQuerySchema.safeParse(query);
    if (!parsed.success)
      return html(
        res,
        400,
        errorPage(
          400,
          `invalid filter: ${parsed.error.issues.map((i) => i.path.join('.')).join(', ')}`,
          w.operator,
          w.csrf,
        ),
      );
    try {
      const page = await listPage(ctx, { role: 'operator', operator: w.operator }, parsed.data);
      html(res, 200, runsPage(w.operator, w.csrf ?? '', parsed.data, page.runs, page.nextCursor));
    } catch (err) {
      if (err instanceof BadCursor) return html(res, 400, errorPage(400, err.message, w.operator, w.csrf));
      throw err;
    }
  });

  /** Everything a run's page shows, or undefined when the operator may not see the run (404 like an unknown one). */
  async function pageData(op: Operator, runId: string): Promise<RunPageData | undefined> {
    if (!isRunId(runId) || !(await operatorSeesRun(ctx, op, runId))) return undefined;
    const view = await runView(ctx, runId, (id) => ledger.listForRun(id));
    if (!view) return undefined;
    const [spec, agent, jobId] = await Promise.all([
      ctx.store.readSpec(runId).catch(() => undefined),
      ctx.redis.hget(ctx.keys.run(runId).run, 'agent'),
      ctx.redis.hget(ctx.keys.run(runId).run, 'jobId'),
    ]);
    return {
      view,
      input: spec ? spec.input : '(unreadable)',
      agent: agent ?? '',
      jobId: jobId ?? '',
      queueName: ctx.keys.queueName(ctx.keys.shardOf(runId)),
      approvals: await pendingApprovals(ctx, ledger, op.tenants, runId),
      humanItems: (await humanQueue(ctx, ledger, op.tenants, runId)) as unknown as HumanItem[],
      jobs: await runJobs(ctx, runId, jobId ?? ''),
      ...(isVersionParked(view.status, view.reason)
        ? {
            versionChange: {
              pinned: versionLabel(view.agent.agentVersion, view.agent.toolsHash),
              served: (await versions.served(agent ?? ''))
                .filter((s) => s.shards.includes(ctx.keys.shardOf(runId)))
                .map((s) => ({
                  agentVersion: s.version,
                  toolsHash: s.toolsHash,
                  label: versionLabel(s.version, s.toolsHash),
                })),
            },
          }
        : {}),
    };
  }

  r.get(`${CONSOLE}/flow`, guard('page'), async (_req, res) => {
    const w = whoOf(res);
    html(res, 200, flowPage(w.operator, await flowViewFor(ctx, w.operator)));
  });

  r.get(`${CONSOLE}/runs/:id`, guard('page'), async (req, res) => {
    const w = whoOf(res);
    const d = await pageData(w.operator, param(req.params.id));
    if (!d) return html(res, 404, errorPage(404, 'no such run', w.operator, w.csrf));
    const done = typeof req.query.done === 'string' ? req.query.done : undefined;
    html(
      res,
      200,
      runPage(w.operator, w.csrf ?? '', { ...d, ...(done && /^[\w :.-]{1,120}$/.test(done) ? { notice: done } : {}) }),
    );
  });

  r.get(`${CONSOLE}/runs/:id/live`, guard('page'), async (req, res) => {
    const w = whoOf(res);
    const d = await pageData(w.operator, param(req.params.id));
    if (!d) return html(res, 404, 'no such run');
    html(res, 200, runLive(w.operator, w.csrf ?? '', d));
  });

  /** After a form: back to the run page with what happened, or the refusal as a page. */
  const answer = (req: Request, res: Response, runId: string, a: ActionAnswer, done: string) => {
    const w = whoOf(res);
    if (a.status >= 200 && a.status < 300)
      return void res.redirect(303, `${CONSOLE}/runs/${encodeURIComponent(runId)}?done=${encodeURIComponent(done)}`);
    html(
      res,
      a.status,
      errorPage(
        a.status,
        `${textOf(a.body.error ?? 'refused')}${a.body.message ? `: ${textOf(a.body.message)}` : ''}`,
        w.operator,
        w.csrf,
      ),
    );
  };
  const mayAct = (res: Response) => {
    const w = whoOf(res);
    if (w.operator.role === 'operator') return true;
    html(
      res,
      403,
      errorPage(403, `operator ${w.operator.name} has the viewer role: it may look, not act`, w.operator, w.csrf),
    );
    return false;
  };

  r.post(`${CONSOLE}/runs/:id/approvals/:actionId`, guard('form'), async (req, res) => {
    if (!mayAct(res)) return;
    const f = decisionForm.safeParse(req.body);
    if (!f.success) return html(res, 400, errorPage(400, 'decision and fingerprint are required'));
    const runId = param(req.params.id);
    const a = await decideApproval(
      ctx,
      ledger,
      whoOf(res).operator,
      param(req.params.actionId),
      f.data.decision,
      f.data.fingerprint,
    );
    answer(req, res, runId, a, f.data.decision === 'approve' ? 'approved' : 'rejected');
  });

  r.post(`${CONSOLE}/runs/:id/reconciliations/:actionId`, guard('form'), async (req, res) => {
    if (!mayAct(res)) return;
    const f = findingForm.safeParse(req.body);
    if (!f.success) return html(res, 400, errorPage(400, 'choose a finding'));
    const receipt = f.data.receipt?.trim() || undefined;
    if (f.data.finding === 'confirmed' && !receipt)
      return html(
        res,
        400,
        errorPage(400, "a confirmed finding needs the service's id", whoOf(res).operator, whoOf(res).csrf),
      );
    const a = await resolveHumanItem(
      ctx,
      ledger,
      compensations,
      whoOf(res).operator,
      param(req.params.actionId),
      f.data.finding,
      receipt,
      { note: f.data.note ?? '', via: 'console' },
    );
    answer(req, res, param(req.params.id), a, `finding recorded: ${f.data.finding}`);
  });

  r.post(`${CONSOLE}/runs/:id/version/continue`, guard('form'), async (req, res) => {
    if (!mayAct(res)) return;
    const f = versionForm.safeParse(req.body);
    if (!f.success) return html(res, 400, errorPage(400, 'agentVersion and toolsHash are required'));
    const runId = param(req.params.id);
    const a = await continueVersionRun(ctx, ledger, versions, whoOf(res).operator, runId, {
      agentVersion: f.data.agentVersion,
      toolsHash: f.data.toolsHash,
    });
    answer(req, res, runId, a, `continued under ${f.data.agentVersion}`);
  });

  r.post(`${CONSOLE}/runs/:id/version/cancel`, guard('form'), async (req, res) => {
    if (!mayAct(res)) return;
    const runId = param(req.params.id);
    answer(req, res, runId, await cancelVersionRun(ctx, whoOf(res).operator, runId), 'cancelled');
  });

  r.post(`${CONSOLE}/runs/:id/cancel`, guard('form'), async (req, res) => {
    if (!mayAct(res)) return;
    const runId = param(req.params.id);
    answer(req, res, runId, await cancelRun(ctx, whoOf(res).operator, runId), 'cancel requested');
  });

  r.post(`${CONSOLE}/runs/:id/retry`, guard('form'), async (req, res) => {
    if (!mayAct(res)) return;
    const f = retryForm.safeParse(req.body);
    if (!f.success)
      return html(
        res,
        400,
        errorPage(
          400,
          `invalid extension: ${f.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join(', ')}`,
          whoOf(res).operator,
          whoOf(res).csrf,
        ),
      );
    const runId = param(req.params.id);
    const { steps, tokens, wallMs } = f.data;
    const ext = {
      ...(steps !== undefined ? { steps } : {}),
      ...(tokens !== undefined ? { tokens } : {}),
      ...(wallMs !== undefined ? { wallMs } : {}),
    };
    const a = await retryStoppedRun(ctx, whoOf(res).operator, runId, ext);
    if (a.status === 400) {
      const fields = (a.body.fields as { path: string; message: string }[] | undefined) ?? [];
      return html(
        res,
        400,
        errorPage(
          400,
          `invalid extension: ${fields.map((x) => `${x.path}: ${x.message}`).join(', ')}`,
          whoOf(res).operator,
          whoOf(res).csrf,
        ),
      );
    }
    answer(req, res, runId, a, 'retried');
  });

  return r;
}
