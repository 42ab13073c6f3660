// A runtime with one tenant whose project registered the fake provider: what every chat test starts from.
import type { Logger } from '@agentplane/lib/logging';
import { FakeOpenAIServer } from '../fakes/openai-server.js';
import { configuredTenant, startTestRuntime, type TestRuntime, type TestTenant } from '../harness/runtime.js';
import { allEvents, type SseEvent } from '../harness/sse.js';

export const MODEL = 'gpt-4o-mini';
export const OTHER_MODEL = 'gpt-4.1';

/** What a test token holds unless narrowed. Not `auto_title`: its model call would take the next scripted reply. */
export const CHAT_CAPABILITIES = ['chat', 'steer', 'ask_user', 'approvals', 'followups', 'recap', 'system_prompt'];

export interface ChatWorld {
  rt: TestRuntime;
  fake: FakeOpenAIServer;
  tenant: TestTenant;
  /** An end-user token with every chat capability unless `grant` narrows it. */
  token(grant?: Parameters<TestTenant['mint']>[0]): Promise<string>;
  chat(token: string, body: Record<string, unknown>): Promise<Response>;
  stream(token: string, body: Record<string, unknown>): Promise<Response>;
  /** POST /chat/stream read to its end. */
  streamAll(token: string, body: Record<string, unknown>): Promise<{ response: Response; events: SseEvent[] }>;
  stop(): Promise<void>;
}

export function providerSection(fake: Pick<FakeOpenAIServer, 'url' | 'apiKey'>, models = [MODEL, OTHER_MODEL], extra: Record<string, unknown> = {}) {
  return [{ id: 'cred-1', kind: 'openai_compatible', base_url: fake.url, api_key: fake.apiKey, models, ...extra }];
}

export async function chatWorld(
  env: Record<string, string> = {},
  options: { fake?: FakeOpenAIServer; configuration?: Record<string, unknown>; logger?: Logger } = {},
): Promise<ChatWorld> {
  const fake = options.fake ?? (await FakeOpenAIServer.start({ apiKey: 'sk-test-provider-key-0001', chatModels: [MODEL, OTHER_MODEL] }));
  const world = await chatRuntime(fake, env, options.configuration, options.logger);
  return {
    ...world,
    fake,
    async stop() {
      await world.stop();
      if (!options.fake) await fake.stop();
    },
  };
}

/** The runtime and tenant of a chat world whose provider is served elsewhere (a fake in another process). */
export async function chatRuntime(
  provider: Pick<FakeOpenAIServer, 'url' | 'apiKey'>,
  env: Record<string, string> = {},
  configuration: Record<string, unknown> = {},
  logger?: Logger,
): Promise<Omit<ChatWorld, 'fake'>> {
  const rt = await startTestRuntime({ env: { AGENTPLANE_ALLOW_PRIVATE_URLS: 'true', PROVIDER_TIMEOUT_MS: '2000', ...env }, ...(logger ? { logger } : {}) });
  const tenant = await configuredTenant(rt, { ceiling: { capabilities: [...CHAT_CAPABILITIES, 'auto_title'], registeredModels: [MODEL, OTHER_MODEL] } });
  const pushed = await tenant.reconfigure({ providers: providerSection(provider), default_model: MODEL, ...configuration });
  if (pushed.status !== 200) throw new Error(`pushing providers answered ${pushed.status}: ${await pushed.text()}`);
  const post = (path: string) => (token: string, body: Record<string, unknown>) => rt.endUser(path, token, { method: 'POST', body: JSON.stringify(body) });
  const stream = post('/chat/stream');
  return {
    rt,
    tenant,
    token: (grant = {}) => tenant.mint({ capabilities: CHAT_CAPABILITIES, ...grant }),
    chat: post('/chat'),
    stream,
    async streamAll(token, body) {
      const response = await stream(token, body);
      return { response, events: response.status === 200 ? await allEvents(response) : [] };
    },
    stop: () => rt.stop(),
  };
}

/**
 * Waits until `check` holds, polling; fails with `what` after a while. The check returns the awaited value (or true)
 * once it holds, and anything falsy (undefined from an optional chain on a row not there yet, null, false) until
 * then; a check that throws fails the wait at once (a crashed runtime is not worth waiting on). The harness's
 * `eventually` differs there: it retries a throwing check.
 */
export async function eventually<T>(check: () => Promise<T | undefined | false>, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
