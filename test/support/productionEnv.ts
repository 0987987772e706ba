/** A production environment the configuration accepts: the engine's settings, and the support agent's vendors. */
export const productionEngine = {
  APP_MODE: 'production',
  MODEL_PROVIDER: 'openai',
  OPENAI_API_KEY: 'sk-x',
  PRODUCER_TOKEN: 'p',
  OPERATOR_TOKEN: 'o',
  REDIS_URL: 'redis://redis:6379',
};

export const supportVendors = {
  SANDBOX_URL: 'http://support:4010',
  ZENDESK_EMAIL: 'agent@acme.com',
  ZENDESK_TOKEN: 'zd-token',
  RESEND_API_KEY: 're_live',
  RESEND_FROM: 'Acme <support@acme.com>',
  STRIPE_API_KEY: 'sk_live_x',
};
