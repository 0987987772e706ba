/**
 * The support agent's own settings: where its vendors are and the credentials they take, read
 * from the environment through the agents module's settings hook (src/config/agentsModule.ts).
 * A URL left unset is SANDBOX_URL (the bundled sandbox speaks all three wires); credentials left
 * unset are the sandbox's, in development only: production refuses them unset, naming the field.
 * Point them at the real services with ZENDESK_URL=https://{subdomain}.zendesk.com,
 * RESEND_URL=https://api.resend.com, STRIPE_URL=https://api.stripe.com.
 */
import { z } from 'zod';
import type { Config } from '../../config/config.js';

const ms = (def: number) => z.coerce.number().int().min(1).default(def);
const url = z.url();

/** The schema for a deployment: production requires what development takes from the sandbox. */
export function supportSettings({ config }: { config: Pick<Config, 'APP_MODE'> }) {
  const production = config.APP_MODE === 'production';
  /** Required in production (`why`: what it is for), optional in development. */
  const needed = (schema: z.ZodString, why: string) =>
    production ? z.string({ error: `required in production (${why})` }).pipe(schema) : schema.optional();
  return z
    .object({
      /**
       * The support system's reads (customers, knowledge base), and every vendor whose URL is unset.
       * Without it in production every tool call would go to the development default on localhost.
       */
      SANDBOX_URL: production
        ? z.string({ error: 'required in production (the support/email/payments service the tools call)' }).pipe(url)
        : url.default('http://127.0.0.1:4010'),
      ZENDESK_URL: url.optional(),
      /** Zendesk API-token auth (`{email}/token:{token}`), or ZENDESK_OAUTH_TOKEN (Bearer) instead. */
      ZENDESK_EMAIL: z.string().min(3).optional(),
      ZENDESK_TOKEN: z.string().min(1).optional(),
      ZENDESK_OAUTH_TOKEN: z.string().min(1).optional(),
      ZENDESK_TIMEOUT_MS: ms(5000),
      RESEND_URL: url.optional(),
      /** `re_...` */
      RESEND_API_KEY: needed(z.string().min(1), 'the email service the tools call'),
      /** The sender address, on a domain verified at Resend: `Support <support@example.com>`. */
      RESEND_FROM: needed(z.string().min(3), 'a sender on a domain verified at Resend'),
      RESEND_TIMEOUT_MS: ms(5000),
      STRIPE_URL: url.optional(),
      /** `sk_...` (or a restricted `rk_...` key allowed to create and list refunds). */
      STRIPE_API_KEY: needed(z.string().min(1), 'the payments service the tools call'),
      STRIPE_TIMEOUT_MS: ms(5000),
    })
    .superRefine((s, ctx) => {
      if (production && !s.ZENDESK_OAUTH_TOKEN && !(s.ZENDESK_EMAIL && s.ZENDESK_TOKEN)) {
        ctx.addIssue({
          code: 'custom',
          path: ['ZENDESK_TOKEN'],
          message: 'required in production with ZENDESK_EMAIL (or ZENDESK_OAUTH_TOKEN)',
        });
      }
    });
}

export type SupportSettings = z.output<ReturnType<typeof supportSettings>>;
