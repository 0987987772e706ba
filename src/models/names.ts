/** The model providers a run may name (`agent.model`) and a deployment may default to (MODEL_PROVIDER). */
export const PROVIDER_NAMES = ['scripted', 'openai', 'anthropic', 'openai-compatible'] as const;
export type ProviderName = (typeof PROVIDER_NAMES)[number];
