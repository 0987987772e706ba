/**
 * The OpenAI provider under its historical name: OpenAI Chat Completions
 * through the AI SDK (src/models/aiSdk.ts), configured by OPENAI_BASE_URL,
 * OPENAI_MODEL and OPENAI_API_KEY.
 */
import { AiSdkProvider, openAIOptions } from './aiSdk.js';

export interface OpenAIOptions {
  baseUrl: string;
  apiKey?: string;
  model: string;
  timeoutMs: number;
}

export class OpenAIProvider extends AiSdkProvider {
  constructor(opts: OpenAIOptions) {
    super(openAIOptions(opts));
  }
}
