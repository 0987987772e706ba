/** The model providers a run may name (`agent.model`) and a deployment may default to (MODEL_PROVIDER). */
export const PROVIDER_NAMES = ['scripted', 'openai', 'anthropic', 'openai-compatible'] as const;
export type ProviderName = (typeof PROVIDER_NAMES)[number];

/** What turns a provider on (a boot error or a 400 says it, so the fix is in the message). */
const ENABLED_BY: Record<ProviderName, string> = {
  scripted: 'the scripted model runs in APP_MODE=development only, unless SCRIPTED_MODEL_ENABLED=false',
  openai: 'set OPENAI_API_KEY (and OPENAI_BASE_URL for another endpoint)',
  anthropic: 'set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for another endpoint)',
  'openai-compatible': 'set OPENAI_COMPATIBLE_BASE_URL (vLLM, Ollama...)',
};

export function enableHint(provider: string): string {
  return (ENABLED_BY as Record<string, string>)[provider] ?? `no such provider (known: ${PROVIDER_NAMES.join(', ')})`;
}
