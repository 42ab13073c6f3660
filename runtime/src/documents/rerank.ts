// Reranks retrieval's candidates with the project's rerank model (docs/decisions/0042), through the provider's
// `POST /rerank` (the Cohere and Jina shape that vLLM, LiteLLM, Infinity and TEI speak), over the same URL-guarded,
// pooled connections as its other models. The openai SDK makes the call (its auth, retries and timeouts) without a
// typed method for it.
import type OpenAI from 'openai';
import { AppError } from '@agentplane/lib/errors';
import { openAIClient, providerMessage } from '@agentplane/lib/models/openai-client';
import type { ConnectionPool } from '@agentplane/lib/net/connection-pool';
import type { UrlPolicy } from '@agentplane/lib/net/url-guard';
import type { RerankTarget } from '../tenants/configuration.js';

/** Relevance of each candidate the model ranked, by its index in `texts`, best first. */
export type Rerank = (target: RerankTarget, query: string, texts: string[], topN: number, signal?: AbortSignal) => Promise<{ index: number; score: number }[]>;

export function createReranker(options: { urlPolicy: UrlPolicy; timeoutMs: number; connections?: ConnectionPool }): Rerank {
  const clients = new Map<string, OpenAI>();
  const clientFor = (target: RerankTarget) => {
    const key = `${target.baseUrl}\n${target.apiKey}`;
    let client = clients.get(key);
    if (!client) {
      client = openAIClient(target, { policy: options.urlPolicy, timeoutMs: options.timeoutMs, ...(options.connections ? { connections: options.connections } : {}) }).withOptions({
        maxRetries: 1,
      });
      if (clients.size >= 256) clients.delete(clients.keys().next().value!);
      clients.set(key, client);
    }
    return client;
  };
  return async (target, query, texts, topN, signal) => {
    let answer: { results?: { index?: unknown; relevance_score?: unknown }[] };
    try {
      answer = await clientFor(target).post('/rerank', { body: { model: target.model, query, documents: texts, top_n: topN }, ...(signal ? { signal } : {}) });
    } catch (error) {
      const api = error as InstanceType<typeof OpenAI.APIError>;
      const why = typeof api?.status === 'number' ? `answered ${api.status}: ${providerMessage(api, target.apiKey)}` : `could not be reached: ${(error as Error).message}`;
      throw new AppError('upstream_failed', `the rerank model '${target.model}' ${why}`, { cause: error });
    }
    const ranked = (answer.results ?? []).flatMap((result) =>
      typeof result.index === 'number' && Number.isInteger(result.index) && result.index >= 0 && result.index < texts.length && typeof result.relevance_score === 'number'
        ? [{ index: result.index, score: result.relevance_score }]
        : [],
    );
    if (ranked.length === 0 && texts.length > 0) throw new AppError('upstream_failed', `the rerank model '${target.model}' answered no ranking`);
    return ranked.sort((a, b) => b.score - a.score);
  };
}
