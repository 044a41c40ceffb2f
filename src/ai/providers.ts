// Chooses and builds the AI provider from configuration (AI_PROVIDER, or whichever
// credentials are set, else the offline one). The one place that reads AI settings.
import { aiProviderOf, type Env } from '../config.ts';
import { localProviderCreate } from './local-provider.ts';
import { azureProviderCreate, openAiProviderCreate } from './openai-provider.ts';
import type { AiProvider, CallObserver } from './types.ts';

/** Builds the configured provider; `observe` receives every outside call (metrics). */
export function aiProviderCreate(config: Env, observe?: CallObserver): AiProvider {
  const provider = aiProviderOf(config);
  const common = { dimensions: config.EMBEDDING_DIMENSIONS, timeoutMs: config.AI_REQUEST_TIMEOUT_MS, maxOutputTokens: config.AI_MAX_OUTPUT_TOKENS, observe };
  if (provider === 'openai') {
    return openAiProviderCreate({
      ...common,
      apiKey: config.OPENAI_API_KEY,
      baseUrl: config.OPENAI_BASE_URL,
      chatModel: config.OPENAI_CHAT_MODEL,
      embeddingModel: config.OPENAI_EMBEDDING_MODEL,
      transcriptionModel: config.TRANSCRIPTION_MODEL,
    });
  }
  if (provider === 'azure') {
    // loadConfig has already required these four for AI_PROVIDER=azure.
    return azureProviderCreate({
      ...common,
      endpoint: config.AZURE_OPENAI_ENDPOINT!,
      apiKey: config.AZURE_OPENAI_API_KEY!,
      apiVersion: config.AZURE_OPENAI_API_VERSION,
      chatDeployment: config.AZURE_OPENAI_CHAT_DEPLOYMENT!,
      embeddingDeployment: config.AZURE_OPENAI_EMBEDDING_DEPLOYMENT!,
      transcriptionDeployment: config.AZURE_OPENAI_TRANSCRIPTION_DEPLOYMENT,
    });
  }
  return localProviderCreate({ dimensions: config.EMBEDDING_DIMENSIONS });
}
