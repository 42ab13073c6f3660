// Which model a turn runs on, where its calls go, and what a call costs.
import { describe, expect, it } from 'vitest';
import { AppError } from '@agentplane/lib/errors';
import { effectivePermission, type Capability } from '@agentplane/lib/permissions';
import type { StoredConfiguration } from '../tenants/configuration.js';
import { chooseModel, costOf } from './model-choice.js';

function configuration(document: { default_model?: string; registeredModels?: string[]; providers?: { models: string[]; prices?: Record<string, { input_per_million_usd: number; output_per_million_usd: number }> }[] }): StoredConfiguration {
  return {
    tenantId: 't',
    version: 1,
    digest: 'd',
    document: {
      ceiling: { capabilities: ['chat'], ...(document.registeredModels ? { registeredModels: document.registeredModels } : {}) },
      ...(document.default_model ? { default_model: document.default_model } : {}),
      providers: (document.providers ?? []).map((provider, i) => ({ id: `p${i}`, kind: 'openai', base_url: `https://p${i}.example/v1`, api_key: `sk-${i}`, ...provider })),
    },
  } as unknown as StoredConfiguration;
}

const permission = (allowedModels?: string[]) =>
  effectivePermission({ ceiling: { capabilities: ['chat'] as Capability[] }, token: { capabilities: ['chat'] as Capability[], ...(allowedModels ? { allowedModels } : {}) } });
const routing = (over: { defaultModel?: string; litellmKey?: string } = {}) => ({ defaultModel: over.defaultModel, litellmKey: over.litellmKey });
const codeOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (error) {
    return error instanceof AppError ? { kind: error.kind, code: error.code } : error;
  }
  return 'no error';
};

describe('chooseModel', () => {
  const served = configuration({ default_model: 'gpt-a', registeredModels: ['gpt-a', 'gpt-b'], providers: [{ models: ['gpt-a', 'gpt-b'], prices: { 'gpt-b': { input_per_million_usd: 1, output_per_million_usd: 2 } } }] });

  it('takes the request, else the tenant default, else the project default', () => {
    expect(chooseModel(served, permission(), routing(), 'gpt-b')).toMatchObject({ kind: 'model', model: 'gpt-b', price: { input_per_million_usd: 1 } });
    expect(chooseModel(served, permission(), routing({ defaultModel: 'gpt-b' }), undefined)).toMatchObject({ model: 'gpt-b' });
    expect(chooseModel(served, permission(), routing(), undefined)).toMatchObject({ model: 'gpt-a', price: undefined });
  });

  it('answers none when nothing names a model', () => {
    expect(chooseModel(configuration({ providers: [] }), permission(), routing(), undefined)).toEqual({ kind: 'none' });
  });

  it('routes to the provider that serves the model, with the tenant litellm key in place of its key', () => {
    expect(chooseModel(served, permission(), routing(), 'gpt-a')).toMatchObject({ target: { baseUrl: 'https://p0.example/v1', apiKey: 'sk-0' } });
    expect(chooseModel(served, permission(), routing({ litellmKey: 'sk-litellm' }), 'gpt-a')).toMatchObject({ target: { apiKey: 'sk-litellm' } });
  });

  it('refuses an unregistered model (400), one outside the allow-list (403) and one no provider serves (409)', () => {
    expect(codeOf(() => chooseModel(served, permission(), routing(), 'gpt-z'))).toEqual({ kind: 'invalid_argument', code: undefined });
    expect(codeOf(() => chooseModel(served, permission(['gpt-a']), routing(), 'gpt-b'))).toEqual({ kind: 'permission_denied', code: 'model_not_allowed' });
    const unserved = configuration({ registeredModels: ['gpt-a'], providers: [] });
    expect(codeOf(() => chooseModel(unserved, permission(), routing(), 'gpt-a'))).toEqual({ kind: 'conflict', code: 'no_provider' });
  });

  it('checks the project default against its providers, not its registered models', () => {
    const gone = configuration({ default_model: 'gpt-old', registeredModels: ['gpt-a'], providers: [{ models: ['gpt-a'] }] });
    expect(codeOf(() => chooseModel(gone, permission(), routing(), undefined))).toEqual({ kind: 'conflict', code: 'no_provider' });
  });
});

describe('costOf', () => {
  it('prices input and output per million tokens, null without a price', () => {
    expect(costOf({ input_per_million_usd: 2, output_per_million_usd: 8 }, { inputTokens: 500_000, outputTokens: 250_000 })).toBe(3);
    expect(costOf(undefined, { inputTokens: 1, outputTokens: 1 })).toBeNull();
  });
});
