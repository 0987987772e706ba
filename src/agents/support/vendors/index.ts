/**
 * The services the support agent's tools call, each with its own base URL,
 * credentials and timeout, from the agent's own settings (../settings.ts:
 * ZENDESK_*, RESEND_*, STRIPE_*). In development every URL
 * defaults to the bundled sandbox (SANDBOX_URL) and the credentials to ones the
 * sandbox accepts; nothing else in the code path differs from the real vendors.
 */
import type { ServiceOptions } from '../../../core/httpJson.js';
import type { ResendOptions } from './resend.js';
import type { StripeOptions } from './stripe.js';
import type { ZendeskOptions } from './zendesk.js';
import type { SupportSettings } from '../settings.js';

export interface SupportServices {
  /** The support system's read endpoints (customers, knowledge base): SANDBOX_URL. */
  reads: ServiceOptions;
  zendesk: ZendeskOptions;
  resend: ResendOptions;
  stripe: StripeOptions;
}

/** Credentials the sandbox accepts (development and tests only: production refuses unset ones). */
export const SANDBOX_CREDENTIALS = {
  zendeskEmail: 'agent@example.com',
  zendeskToken: 'sandbox-zendesk-token',
  resendApiKey: 're_sandbox_key',
  resendFrom: 'Support <support@example.com>',
  stripeApiKey: 'sk_test_sandbox',
} as const;

/** Every vendor at one base URL (the sandbox), with the sandbox's credentials. */
export function sandboxServices(baseUrl: string): SupportServices {
  const c = SANDBOX_CREDENTIALS;
  return {
    reads: { baseUrl },
    zendesk: { baseUrl, auth: { kind: 'api_token', email: c.zendeskEmail, token: c.zendeskToken }, timeoutMs: 5000 },
    resend: { baseUrl, apiKey: c.resendApiKey, from: c.resendFrom, timeoutMs: 5000 },
    stripe: { baseUrl, apiKey: c.stripeApiKey, timeoutMs: 5000 },
  };
}

/** The services as configured (the settings schema has already refused missing production credentials). */
export function supportServices(cfg: SupportSettings): SupportServices {
  const c = SANDBOX_CREDENTIALS;
  const trim = (u: string) => u.replace(/\/+$/, '');
  const zendeskAuth: ZendeskOptions['auth'] = cfg.ZENDESK_OAUTH_TOKEN
    ? { kind: 'oauth', accessToken: cfg.ZENDESK_OAUTH_TOKEN }
    : { kind: 'api_token', email: cfg.ZENDESK_EMAIL ?? c.zendeskEmail, token: cfg.ZENDESK_TOKEN ?? c.zendeskToken };
  return {
    reads: { baseUrl: trim(cfg.SANDBOX_URL) },
    zendesk: {
      baseUrl: trim(cfg.ZENDESK_URL ?? cfg.SANDBOX_URL),
      auth: zendeskAuth,
      timeoutMs: cfg.ZENDESK_TIMEOUT_MS,
    },
    resend: {
      baseUrl: trim(cfg.RESEND_URL ?? cfg.SANDBOX_URL),
      apiKey: cfg.RESEND_API_KEY ?? c.resendApiKey,
      from: cfg.RESEND_FROM ?? c.resendFrom,
      timeoutMs: cfg.RESEND_TIMEOUT_MS,
    },
    stripe: {
      baseUrl: trim(cfg.STRIPE_URL ?? cfg.SANDBOX_URL),
      apiKey: cfg.STRIPE_API_KEY ?? c.stripeApiKey,
      timeoutMs: cfg.STRIPE_TIMEOUT_MS,
    },
  };
}
