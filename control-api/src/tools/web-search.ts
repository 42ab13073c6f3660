// The project's web search engine (docs/decisions/0055): Brave Search's API with the project's key, or a SearXNG
// instance it hosts. Tried with one real search through the URL guard before it is stored, its key sealed, and
// pushed to the runtime, which searches with it.
import { AppError, invalidArgument } from '@agentplane/lib/errors';
import type { SecretBox } from '@agentplane/lib/crypto/secret-box';
import { cappedText } from '@agentplane/lib/net/capped';
import { guardedFetch } from '@agentplane/lib/net/guarded-fetch';
import type { UrlPolicy } from '@agentplane/lib/net/url-guard';
import type { ProjectService } from '../projects/service.js';
import { webSearchKeyAad } from './configuration.js';

export const BRAVE_BASE_URL = 'https://api.search.brave.com';

export interface WebSearchInput {
  provider: 'brave' | 'searxng' | null;
  base_url?: string | undefined;
  api_key?: string | undefined;
}

export interface WebSearchOut {
  provider: 'brave' | 'searxng' | null;
  base_url: string | null;
  key_last_four: string | null;
}

export class WebSearchService {
  constructor(
    private readonly projects: ProjectService,
    private readonly secrets: SecretBox,
    private readonly urlPolicy: UrlPolicy,
    private readonly timeoutMs: number,
  ) {}

  async get(projectId: string): Promise<WebSearchOut> {
    return this.present(projectId, await this.projects.webSearchOf(projectId));
  }

  /** Chooses the engine (or none, with `provider: null`), after one search with it answered. */
  async set(projectId: string, input: WebSearchInput): Promise<WebSearchOut> {
    await this.projects.targetOf(projectId);
    if (input.provider === null) {
      await this.projects.applyChange(projectId, async () => ({ set: { web_search: null }, result: undefined }));
      return { provider: null, base_url: null, key_last_four: null };
    }
    if (input.provider === 'brave' && !input.api_key) throw invalidArgument('api_key is required for brave: the Brave Search API key');
    if (input.provider === 'searxng' && !input.base_url) throw invalidArgument('base_url is required for searxng: the root of your SearXNG instance');
    const baseUrl = (input.base_url ?? BRAVE_BASE_URL).replace(/\/+$/, '');
    await this.tryOnce(input.provider, baseUrl, input.api_key);
    const stored = {
      provider: input.provider,
      base_url: baseUrl,
      ...(input.api_key ? { sealed_api_key: this.secrets.seal(input.api_key, webSearchKeyAad(projectId)) } : {}),
    };
    await this.projects.applyChange(projectId, async () => ({ set: { web_search: JSON.stringify(stored) }, result: undefined }));
    return this.present(projectId, stored);
  }

  /** One search for a plain word: a refused key is 400, an engine that cannot be reached 502, a silent one 504. */
  private async tryOnce(provider: 'brave' | 'searxng', baseUrl: string, apiKey: string | undefined): Promise<void> {
    const url =
      provider === 'brave'
        ? `${baseUrl}/res/v1/web/search?${new URLSearchParams({ q: 'weather', count: '1' })}`
        : `${baseUrl}/search?${new URLSearchParams({ q: 'weather', format: 'json' })}`;
    const headers: Record<string, string> = { accept: 'application/json' };
    if (apiKey) headers[provider === 'brave' ? 'x-subscription-token' : 'authorization'] = provider === 'brave' ? apiKey : `Bearer ${apiKey}`;
    const response = await guardedFetch(url, { headers }, { ...this.urlPolicy, timeoutMs: this.timeoutMs }).catch((error: unknown) => {
      if (error instanceof AppError && error.kind === 'invalid_argument') throw invalidArgument(`base_url: ${error.message}`, { code: 'url_not_allowed' });
      throw error;
    });
    const text = await cappedText(response, 2 * 1024 * 1024, 'the search engine');
    if (response.status === 401 || response.status === 403) throw invalidArgument(`the search engine refused the key (HTTP ${response.status})`, { code: 'provider_rejected' });
    if (!response.ok) throw new AppError('upstream_failed', `the search engine answered HTTP ${response.status} to a test search`);
    try {
      JSON.parse(text);
    } catch {
      throw invalidArgument(`the search engine did not answer with JSON: is ${provider === 'searxng' ? "the instance's json format enabled" : 'base_url right'}?`, { code: 'provider_rejected' });
    }
  }

  private present(projectId: string, stored: { provider: 'brave' | 'searxng'; base_url: string; sealed_api_key?: string } | null): WebSearchOut {
    if (!stored) return { provider: null, base_url: null, key_last_four: null };
    const key = stored.sealed_api_key ? this.secrets.open(stored.sealed_api_key, webSearchKeyAad(projectId)) : null;
    return { provider: stored.provider, base_url: stored.base_url, key_last_four: key && key.length >= 12 ? key.slice(-4) : null };
  }
}
